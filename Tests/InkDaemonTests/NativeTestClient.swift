import Glibc
import InkCodec
import InkCrypto
import InkProtocol

/// A minimal native device built from the pure pieces: session messages over a sealed session
/// (docs/protocol.md 4; OpenSSL) on a UDP socket, or over length-prefixed sealed messages on a
/// TCP stream. The first message sent must be the join: it rides in the handshake. Without
/// `serverKey` the device asks the daemon for its key first (trust on first use).
final class NativeTestClient {
    enum Transport { case udp, tcp }

    let transport: Transport
    let port: UInt16
    let serverKey: [UInt8]?
    let connectionID = UInt64.random(in: 1...UInt64.max)
    private(set) var fd: Int32
    private(set) var sealed: SealedDatagramSession?
    private(set) var stream: SealedStreamSession?
    private var streamBuffer: [UInt8] = []
    /// Every event the sealed session reported (resets, notices...).
    private(set) var sealedEvents: [SealedEvent] = []
    /// Messages received and not yet taken.
    private var inbox: [ServerMessage] = []
    private var liveCodec = BinaryCodecState()
    private var outCodec = BinaryCodecState()
    private(set) var closedByPeer = false
    /// The producer id joins carry (the daemon deduplicates resent batches by it).
    var origin = UInt64.random(in: 1...UInt64.max)

    /// `source`: another loopback address to come from ("127.0.0.2"), i.e. another device.
    init(_ transport: Transport, port: UInt16, ipv6: Bool = false, serverKey: [UInt8]? = nil, from source: String? = nil) throws {
        self.transport = transport
        self.port = port
        self.serverKey = serverKey
        fd = ipv6 && transport == .tcp ? try connectLoopbackIPv6(port: port)
            : try connectLoopback(port: port, type: transport == .udp ? SOCK_DGRAM : SOCK_STREAM, from: source)
    }

    private var now: Instant { Instant(microseconds: monotonicMicroseconds()) }

    deinit { close(fd) }

    /// Moves to a new UDP socket (a new source port), keeping the session: roaming.
    func roam() throws {
        close(fd)
        fd = try connectLoopback(port: port, type: SOCK_DGRAM)
    }

    func send(_ message: ClientMessage) {
        let bytes = SessionMessageCodec.encode(message)
        switch transport {
        case .udp:
            if let sealed {
                try? sealed.send(bytes)
            } else {
                sealed = SealedDatagramSession(deviceConnectionID: connectionID, serverKey: serverKey, join: bytes,
                                               crypto: OpenSSLCrypto.shared, now: now)
            }
        case .tcp:
            if let stream {
                stream.send(bytes, now: now)
            } else {
                stream = SealedStreamSession(serverKey: serverKey, join: bytes, crypto: OpenSSLCrypto.shared)
            }
        }
        pump(untilMicroseconds: 0)
    }

    /// Writes raw bytes to the socket (a protocol 1 device, garbage).
    func sendRaw(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Raw bytes received within `limit` (nothing is decoded): one datagram, or a stream read.
    func receiveRaw(limitMicroseconds: UInt64 = 2_000_000) -> [UInt8]? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, Int32(limitMicroseconds / 1000)) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? Array(buffer[..<n]) : nil
    }

    func join(room: String, user: String, role: MemberRole, token: String = "") {
        send(.join(JoinRequest(room: room, user: user, role: role, token: Array(token.utf8), origin: origin)))
    }

    /// Encodes `commands` as this device's batch `originSeq`.
    func sendBatch(_ commands: [Command], originSeq: UInt64, author: AuthorID) {
        let batch = Batch(author: author, commands: commands.enumerated().map { TimedCommand(timeMs: UInt64($0.offset), command: $0.element) })
        let payload = try! BinaryBatchCodec.encode(batch, state: &outCodec)
        send(.batch(originSeq: originSeq, payload: payload))
    }

    /// The next message matching `predicate` (others before it are dropped), within the limit.
    func next(limitMicroseconds: UInt64 = 3_000_000, where predicate: (ServerMessage) -> Bool = { _ in true }) -> ServerMessage? {
        let deadline = monotonicMicroseconds() + limitMicroseconds
        while true {
            if let index = inbox.firstIndex(where: predicate) {
                let message = inbox[index]
                inbox.removeFirst(index + 1)
                return message
            }
            if monotonicMicroseconds() >= deadline || closedByPeer { return nil }
            pump(untilMicroseconds: deadline)
        }
    }

    /// The commands of the next `roomBatch`, decoded with this device's live codec state.
    func nextRoomBatch(limitMicroseconds: UInt64 = 3_000_000) -> (RoomBatch, [Command])? {
        guard case .roomBatch(let batch)? = next(limitMicroseconds: limitMicroseconds, where: { if case .roomBatch = $0 { true } else { false } }) else {
            return nil
        }
        guard let decoded = try? BinaryBatchCodec.decode(batch.payload, state: &liveCodec) else { return nil }
        return (batch, decoded.commands.map(\.command))
    }

    /// Keeps the session alive (acks, retransmissions) for a while.
    func idle(microseconds: UInt64) {
        let deadline = monotonicMicroseconds() + microseconds
        while monotonicMicroseconds() < deadline { pump(untilMicroseconds: deadline) }
    }

    private func transmit(at instant: Instant) {
        if let sealed {
            while let datagram = sealed.pollTransmit(now: instant) { sendRaw(datagram.bytes) }
        }
        if let stream {
            while let m = stream.pollMessage() { sendRaw(StreamFrameDecoder.frame(m)) }
        }
        drainEvents()
    }

    private func pump(untilMicroseconds deadline: UInt64) {
        let now = monotonicMicroseconds()
        transmit(at: Instant(microseconds: now))
        guard deadline > now else { return }
        var wait = deadline - now
        if let timeout = sealed?.pollTimeout() {
            wait = min(wait, timeout.microseconds > now ? timeout.microseconds - now : 0)
        }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(min((wait + 999) / 1000, 50)))
        let after = Instant(microseconds: monotonicMicroseconds())
        var buffer = [UInt8](repeating: 0, count: 65536)
        if ready > 0 {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                if let sealed {
                    sealed.handleDatagram(Array(buffer[..<n]), now: after)
                } else {
                    streamBuffer += buffer[..<n]
                    parseStream(now: after)
                }
            } else if transport == .tcp {
                closedByPeer = true
            }
        }
        if let sealed, let timeout = sealed.pollTimeout(), timeout <= after { sealed.handleTimeout(now: after) }
        transmit(at: after)
    }

    private func drainEvents() {
        while let event = sealed?.pollEvent() ?? stream?.pollEvent() {
            sealedEvents.append(event)
            switch event {
            case .delivered(let bytes):
                if let message = try? SessionMessageCodec.decodeServer(bytes) { inbox.append(message) }
            case .peerClosed, .failed, .reset:
                closedByPeer = true
            default:
                break
            }
        }
    }

    private func parseStream(now: Instant) {
        while streamBuffer.count >= 4 {
            let length = Int(streamBuffer[0]) << 24 | Int(streamBuffer[1]) << 16 | Int(streamBuffer[2]) << 8 | Int(streamBuffer[3])
            guard streamBuffer.count >= 4 + length else { return }
            let message = Array(streamBuffer[4..<(4 + length)])
            streamBuffer.removeFirst(4 + length)
            do { try stream?.handleMessage(message, now: now) } catch { closedByPeer = true }
            drainEvents()
        }
    }
}
