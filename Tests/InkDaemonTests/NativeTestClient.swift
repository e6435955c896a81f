import Glibc
import InkCodec
import InkProtocol

/// A minimal native device built from the pure pieces: session messages over an `ARQSession`
/// on a UDP socket, or over length-prefixed frames on a TCP stream.
final class NativeTestClient {
    enum Transport { case udp, tcp }

    let transport: Transport
    let port: UInt16
    private(set) var fd: Int32
    private let arq: ARQSession?
    private var streamBuffer: [UInt8] = []
    /// Messages received and not yet taken.
    private var inbox: [ServerMessage] = []
    private var liveCodec = BinaryCodecState()
    private var outCodec = BinaryCodecState()
    private(set) var closedByPeer = false
    /// The producer id joins carry (the daemon deduplicates resent batches by it).
    var origin = UInt64.random(in: 1...UInt64.max)

    init(_ transport: Transport, port: UInt16, ipv6: Bool = false) throws {
        self.transport = transport
        self.port = port
        fd = ipv6 && transport == .tcp ? try connectLoopbackIPv6(port: port)
            : try connectLoopback(port: port, type: transport == .udp ? SOCK_DGRAM : SOCK_STREAM)
        arq = transport == .udp
            ? ARQSession(connectionID: UInt64.random(in: 1...UInt64.max), now: Instant(microseconds: monotonicMicroseconds()))
            : nil
    }

    deinit { close(fd) }

    /// Moves to a new UDP socket (a new source port), keeping the session: roaming.
    func roam() throws {
        close(fd)
        fd = try connectLoopback(port: port, type: SOCK_DGRAM)
    }

    func send(_ message: ClientMessage) {
        let bytes = SessionMessageCodec.encode(message)
        if let arq {
            try? arq.send(bytes)
            pump(untilMicroseconds: 0)
        } else {
            var framed = [UInt8(bytes.count >> 24 & 0xff), UInt8(bytes.count >> 16 & 0xff), UInt8(bytes.count >> 8 & 0xff), UInt8(bytes.count & 0xff)]
            framed += bytes
            _ = framed.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
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

    private func pump(untilMicroseconds deadline: UInt64) {
        let now = monotonicMicroseconds()
        if let arq {
            while let datagram = arq.pollTransmit(now: Instant(microseconds: now)) {
                _ = datagram.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
            }
            drainEvents()
        }
        guard deadline > now else { return }
        var wait = deadline - now
        if let timeout = arq?.pollTimeout() {
            wait = min(wait, timeout.microseconds > now ? timeout.microseconds - now : 0)
        }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(min((wait + 999) / 1000, 50)))
        let after = Instant(microseconds: monotonicMicroseconds())
        var buffer = [UInt8](repeating: 0, count: 65536)
        if ready > 0 {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                if let arq {
                    arq.handleDatagram(Array(buffer[..<n]), now: after)
                } else {
                    streamBuffer += buffer[..<n]
                    parseStream()
                }
            } else if arq == nil {
                closedByPeer = true
            }
        }
        if let arq {
            if let timeout = arq.pollTimeout(), timeout <= after { arq.handleTimeout(now: after) }
            while let datagram = arq.pollTransmit(now: after) {
                _ = datagram.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
            }
            drainEvents()
        }
    }

    private func drainEvents() {
        guard let arq else { return }
        while let event = arq.pollEvent() {
            switch event {
            case .delivered(let bytes):
                if let message = try? SessionMessageCodec.decodeServer(bytes) { inbox.append(message) }
            case .peerClosed, .failed:
                closedByPeer = true
            case .peerUnreachable, .peerReachable:
                break
            }
        }
    }

    private func parseStream() {
        while streamBuffer.count >= 4 {
            let length = Int(streamBuffer[0]) << 24 | Int(streamBuffer[1]) << 16 | Int(streamBuffer[2]) << 8 | Int(streamBuffer[3])
            guard streamBuffer.count >= 4 + length else { return }
            if let message = try? SessionMessageCodec.decodeServer(Array(streamBuffer[4..<(4 + length)])) { inbox.append(message) }
            streamBuffer.removeFirst(4 + length)
        }
    }
}
