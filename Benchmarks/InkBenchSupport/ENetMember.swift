import CENet

/// One room member talking to `ENetRelayServer`: connects, joins a room, sends batches and
/// receives the other members' batches stamped with the monotonic receive time (nanoseconds),
/// so the benchmark can measure latency against a send time carried inside the batch.
///
/// Not thread-safe: create, service and drop a member on one thread only.
public final class ENetMember {
    /// Most received batches held until `takeReceived()`; further ones are counted and dropped.
    public static let maximumReceivedBacklog = 65_536

    /// One batch delivered by the relay.
    public struct Received: Equatable, Sendable {
        public var bytes: [UInt8]
        public var receivedAtNanoseconds: UInt64
    }

    public private(set) var received: [Received] = []
    /// Batches dropped because the backlog was full (a benchmark bug if ever non-zero).
    public private(set) var droppedReceived = 0
    public private(set) var joinedRoom: String?
    public private(set) var disconnected = false
    private let host: UnsafeMutablePointer<ENetHost>
    private let peer: UnsafeMutablePointer<ENetPeer>

    /// Connects to a relay at `host:port`, servicing up to `timeoutMs` for the handshake.
    /// `pump` runs between waits, e.g. to service a relay living on the same thread.
    public init(host hostName: String = "127.0.0.1", port: UInt16, timeoutMs: UInt32 = 2000, pump: () -> Void = {})
        throws(ENetError) {
        try ENetRuntime.ensureInitialized()
        var address = try ENetRuntime.address(host: hostName, port: port)
        guard let created = enet_host_create(nil, 1, ENetRuntime.channelCount, 0, 0) else { throw .hostCreateFailed }
        guard let connecting = enet_host_connect(created, &address, ENetRuntime.channelCount, 0) else {
            enet_host_destroy(created)
            throw .connectFailed
        }
        host = created
        peer = connecting
        ENetRuntime.configure(connecting)
        var event = ENetEvent()
        let deadline = ENetRuntime.nowNanoseconds() + UInt64(timeoutMs) * 1_000_000
        while ENetRuntime.nowNanoseconds() < deadline {
            pump()
            if enet_host_service(host, &event, 1) > 0, event.type == ENET_EVENT_TYPE_CONNECT { return }
        }
        // Every stored property is set, so deinit runs and destroys the host.
        throw .connectTimedOut
    }

    deinit {
        enet_peer_disconnect_now(peer, 0)
        enet_host_destroy(host)
    }

    /// The host's UDP socket, so a harness can wake on its traffic (poll readable, then `service`).
    public var socketDescriptor: Int32 { Int32(host.pointee.socket) }

    /// Sends a join for `room` and services until the relay acknowledges it (or `timeoutMs`).
    /// `pump` runs between waits, e.g. to service an in-thread relay.
    public func join(room: String, timeoutMs: UInt32 = 2000, pump: () -> Void = {}) throws(ENetError) {
        let name = Array(room.utf8)
        guard name.count <= ENetRelayServer.maximumRoomNameBytes else { throw .roomNameTooLong(name.count) }
        try send(name, channel: ENetRuntime.controlChannel)
        let deadline = ENetRuntime.nowNanoseconds() + UInt64(timeoutMs) * 1_000_000
        while joinedRoom == nil, ENetRuntime.nowNanoseconds() < deadline {
            pump()
            service(timeoutMs: 1)
        }
        guard joinedRoom == room else { throw .joinTimedOut }
    }

    /// Queues one batch, reliable and ordered, for the relay (sent on the next `service`).
    public func send(batch: [UInt8]) throws(ENetError) {
        guard joinedRoom != nil else { throw .notJoined }
        guard batch.count <= ENetRelayServer.maximumBatchBytes else { throw .batchTooLarge(batch.count) }
        try send(batch, channel: ENetRuntime.batchChannel)
    }

    /// Waits up to `timeoutMs` for traffic, handles every pending event and flushes sends.
    public func service(timeoutMs: UInt32) {
        var event = ENetEvent()
        var wait = timeoutMs
        while enet_host_service(host, &event, wait) > 0 {
            handle(event)
            wait = 0
        }
        enet_host_flush(host)
    }

    /// Hands over the batches received so far, oldest first.
    public func takeReceived() -> [Received] {
        defer { received.removeAll(keepingCapacity: true) }
        return received
    }

    private func handle(_ event: ENetEvent) {
        switch event.type {
        case ENET_EVENT_TYPE_RECEIVE:
            guard let packet = event.packet else { return }
            let stamp = ENetRuntime.nowNanoseconds()
            defer { enet_packet_destroy(packet) }
            let bytes = Array(UnsafeRawBufferPointer(start: packet.pointee.data, count: packet.pointee.dataLength))
            if event.channelID == ENetRuntime.controlChannel {
                joinedRoom = String(decoding: bytes, as: UTF8.self)
            } else if received.count < Self.maximumReceivedBacklog {
                received.append(Received(bytes: bytes, receivedAtNanoseconds: stamp))
            } else {
                droppedReceived += 1
            }
        case ENET_EVENT_TYPE_DISCONNECT:
            disconnected = true
        default:
            break
        }
    }

    private func send(_ bytes: [UInt8], channel: UInt8) throws(ENetError) {
        let packet = bytes.withUnsafeBytes { enet_packet_create($0.baseAddress, $0.count, ENET_PACKET_FLAG_RELIABLE.rawValue) }
        guard let packet else { throw .sendFailed }
        guard enet_peer_send(peer, channel, packet) == 0 else {
            enet_packet_destroy(packet)
            throw .sendFailed
        }
    }
}
