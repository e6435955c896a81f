import CENet

/// The ENet baseline relay for the packet-loss benchmark: the same job as inkwired's rooms, done
/// with ENet reliable channels. A client's first control packet names its room; the relay
/// acknowledges it on the control channel, then fans every batch the client sends out, reliable
/// and ordered, to every other member of the room, in join order. Batches are opaque bytes.
///
/// ENet hosts are not thread-safe: create, service and drop a relay on one thread only.
public final class ENetRelayServer {
    /// Most simultaneous peers (ENet's protocol limit is 4095 peer ids).
    public static let maximumPeers = 4095
    /// Longest room name in bytes.
    public static let maximumRoomNameBytes = 64
    /// Largest batch relayed; bigger ones are dropped and counted.
    public static let maximumBatchBytes = 64 * 1024
    /// Most packets a member may have queued for sending; a member that falls further behind is
    /// disconnected rather than letting the relay buffer without bound.
    public static let maximumQueuedPacketsPerPeer = 8192
    /// Most bytes ENet may hold per peer while reassembling incoming packets.
    public static let maximumWaitingBytesPerPeer = 4 * 1024 * 1024

    /// Counters for the benchmark report.
    public struct Stats: Equatable, Sendable {
        public var joins = 0
        public var batchesIn = 0
        public var packetsOut = 0
        public var droppedOversized = 0
        public var droppedBeforeJoin = 0
        public var slowMembersDisconnected = 0
    }

    /// The UDP port actually bound (resolved when created with port 0).
    public let port: UInt16
    public private(set) var stats = Stats()
    private let host: UnsafeMutablePointer<ENetHost>
    /// Room of each joined peer, keyed by the peer's address.
    private var roomOfPeer: [UInt: String] = [:]
    /// Members of each room in join order (the fan-out order).
    private var members: [String: [UnsafeMutablePointer<ENetPeer>]] = [:]

    /// Binds a relay on `host:port` (IPv4; port 0 picks a free one, see `port`).
    public init(host hostName: String = "127.0.0.1", port requested: UInt16 = 0) throws(ENetError) {
        try ENetRuntime.ensureInitialized()
        var address = try ENetRuntime.address(host: hostName, port: requested)
        guard let created = enet_host_create(&address, Self.maximumPeers, ENetRuntime.channelCount, 0, 0) else {
            throw .hostCreateFailed
        }
        created.pointee.maximumWaitingData = Self.maximumWaitingBytesPerPeer
        host = created
        port = created.pointee.address.port
    }

    deinit { enet_host_destroy(host) }

    /// Members currently in `room`, in join order.
    public func memberCount(in room: String) -> Int { members[room]?.count ?? 0 }

    /// Waits up to `timeoutMs` for network activity, then handles every pending event without
    /// waiting further. Returns how many events were handled.
    @discardableResult
    public func service(timeoutMs: UInt32) -> Int {
        var event = ENetEvent()
        var handled = 0
        var wait = timeoutMs
        while enet_host_service(host, &event, wait) > 0 {
            handle(event)
            handled += 1
            wait = 0
        }
        enet_host_flush(host)
        return handled
    }

    /// Services until `shouldStop()` returns true, checking it every `timeoutMs`.
    public func run(timeoutMs: UInt32 = 5, until shouldStop: () -> Bool) {
        while !shouldStop() { service(timeoutMs: timeoutMs) }
    }

    private func handle(_ event: ENetEvent) {
        switch event.type {
        case ENET_EVENT_TYPE_RECEIVE:
            guard let peer = event.peer, let packet = event.packet else { return }
            // The received packet is ours: destroy it after copying what we need.
            defer { enet_packet_destroy(packet) }
            let bytes = UnsafeRawBufferPointer(start: packet.pointee.data, count: packet.pointee.dataLength)
            if event.channelID == ENetRuntime.controlChannel {
                join(peer, bytes)
            } else {
                relay(from: peer, bytes)
            }
        case ENET_EVENT_TYPE_CONNECT:
            if let peer = event.peer { ENetRuntime.configure(peer) }
        case ENET_EVENT_TYPE_DISCONNECT:
            guard let peer = event.peer else { return }
            leave(peer)
        default:
            break
        }
    }

    private func join(_ peer: UnsafeMutablePointer<ENetPeer>, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= Self.maximumRoomNameBytes, roomOfPeer[UInt(bitPattern: peer)] == nil else {
            enet_peer_disconnect(peer, 0)
            return
        }
        let room = String(decoding: bytes, as: UTF8.self)
        roomOfPeer[UInt(bitPattern: peer)] = room
        members[room, default: []].append(peer)
        stats.joins += 1
        // Acknowledge with the room name so the client knows batches will now be relayed.
        if let ack = enet_packet_create(bytes.baseAddress, bytes.count, ENET_PACKET_FLAG_RELIABLE.rawValue) {
            if enet_peer_send(peer, ENetRuntime.controlChannel, ack) != 0 { enet_packet_destroy(ack) }
        }
    }

    private func relay(from sender: UnsafeMutablePointer<ENetPeer>, _ bytes: UnsafeRawBufferPointer) {
        guard let room = roomOfPeer[UInt(bitPattern: sender)] else {
            stats.droppedBeforeJoin += 1
            return
        }
        guard bytes.count <= Self.maximumBatchBytes else {
            stats.droppedOversized += 1
            return
        }
        stats.batchesIn += 1
        let others = (members[room] ?? []).filter { $0 != sender }
        guard !others.isEmpty,
              let packet = enet_packet_create(bytes.baseAddress, bytes.count, ENET_PACKET_FLAG_RELIABLE.rawValue)
        else { return }
        var slow: [UnsafeMutablePointer<ENetPeer>] = []
        for member in others {
            if enet_list_size(&member.pointee.outgoingCommands) >= Self.maximumQueuedPacketsPerPeer {
                slow.append(member)
                continue
            }
            // ENet reference-counts the packet across peers; a failed send takes no reference.
            if enet_peer_send(member, ENetRuntime.batchChannel, packet) == 0 { stats.packetsOut += 1 }
        }
        if packet.pointee.referenceCount == 0 { enet_packet_destroy(packet) }
        for member in slow {
            stats.slowMembersDisconnected += 1
            leave(member)
            enet_peer_disconnect_now(member, 0)
        }
    }

    private func leave(_ peer: UnsafeMutablePointer<ENetPeer>) {
        guard let room = roomOfPeer.removeValue(forKey: UInt(bitPattern: peer)) else { return }
        members[room]?.removeAll { $0 == peer }
        if members[room]?.isEmpty == true { members[room] = nil }
    }
}
