import InkBenchSupport
import InkClient
import InkCodec
import InkCrypto
import InkProtocol
import InkUV

/// One room member of a loss run, whatever its transport: joins, sends the drawer's batches,
/// and reports every batch it receives with the monotonic time (µs) it arrived.
protocol LossMember: AnyObject {
    /// The join was accepted.
    var isJoined: Bool { get }
    /// The author id the relay gave this member (what the drawer's commands carry).
    var author: AuthorID? { get }
    /// Called with each received batch's commands, in arrival order, and the arrival time.
    var onDelivered: ([TimedCommand], UInt64) -> Void { get set }
    /// The first thing that went wrong (a lost session, an undecodable batch), for the report.
    var failure: String? { get }
    /// Queues one batch for the room; it goes out at once when the transport allows.
    func send(_ commands: [TimedCommand])
    func close()
}

/// An inkwired member: `ClientSession` over a UDP socket (ARQ) or a TCP stream, on the run's
/// loop, sealed (OpenSSL, the daemon's key pinned from its ready line) as every device is.
final class InkwireLossMember: LossMember {
    let session: ClientSession
    var onDelivered: ([TimedCommand], UInt64) -> Void = { _, _ in }
    private(set) var isJoined = false
    private(set) var failure: String?
    var author: AuthorID? { session.member }
    /// User names of the other members present, as the relay announced them.
    private(set) var presentUsers: Set<String> = []

    private let loop: EventLoop
    private var udp: UDPSocket?
    private var tcp: TCPConnection?
    private var connected = false
    private let timer: LoopTimer
    /// The TCP retransmission-timeout ceiling a device sets (inkwired's default `--tcp-rto-max-ms`).
    static let defaultTCPRetransmitCeilingMs = ClientConfiguration.streamRetransmitCeilingMs
    /// Batches the session refused for now (too many unacknowledged); sent first, in order.
    private var waiting: [[TimedCommand]] = []

    init(loop: EventLoop, server: SocketAddress, datagram: Bool, configuration: ClientConfiguration,
         tcpRetransmitCeilingMs: UInt32 = InkwireLossMember.defaultTCPRetransmitCeilingMs) throws {
        self.loop = loop
        timer = try LoopTimer(loop: loop)
        let now = Instant(microseconds: loop.now)
        if datagram {
            session = ClientSession(configuration, transport: .datagram(connectionID: UInt64.random(in: 1...UInt64.max)),
                                    crypto: OpenSSLCrypto.shared, now: now)
            let local: SocketAddress = server.family == .ipv4 ? .anyIPv4(port: 0) : .anyIPv6(port: 0)
            let socket = try UDPSocket(loop: loop, bindTo: local)
            try socket.connect(to: server)
            try? socket.setReceiveBufferSize(4 << 20)
            try socket.startReceiving { [unowned self] bytes, _ in
                session.handleDatagram(Array(bytes), now: Instant(microseconds: self.loop.now))
                pump()
            }
            udp = socket
            connected = true
            pump()
        } else {
            session = ClientSession(configuration, transport: .stream, crypto: OpenSSLCrypto.shared, now: now)
            tcp = try TCPConnection.connect(loop: loop, to: server) { [unowned self] result in
                switch result {
                case .failure(let error):
                    failure = failure ?? "tcp connect: \(error)"
                case .success(let connection):
                    try? connection.setNoDelay(true)
                    // The device's side of the stream gets the daemon's retransmission ceiling
                    // too (protocol.md 8.2): the drawer's batches travel this way.
                    if tcpRetransmitCeilingMs > 0 { try? connection.setRetransmitCeiling(milliseconds: tcpRetransmitCeilingMs) }
                    do {
                        try connection.startReading({ [unowned self] bytes in
                                        session.handleStreamBytes(Array(bytes), now: Instant(microseconds: self.loop.now))
                            pump()
                        }, onEnd: { [unowned self] error in
                            failure = failure ?? "tcp stream ended: \(error.map { "\($0)" } ?? "end of stream")"
                            session.handleTransportClosed(now: Instant(microseconds: self.loop.now))
                            pump()
                        })
                    } catch {
                        failure = failure ?? "tcp read: \(error)"
                    }
                    connected = true
                    pump()
                }
            }
        }
    }

    func send(_ commands: [TimedCommand]) {
        waiting.append(commands)
        pump()
    }

    private func pump() {
        let now = Instant(microseconds: loop.now)
        while !waiting.isEmpty {
            do {
                try session.send(waiting[0], now: now)
                waiting.removeFirst()
            } catch .tooManyPending {
                break
            } catch {
                failure = failure ?? "send: \(error)"
                waiting.removeAll()
            }
        }
        if connected {
            while let bytes = session.pollTransmit(now: now) {
                if let udp { _ = try? udp.send(bytes) } else if let tcp { _ = try? tcp.write(bytes) }
            }
        }
        while let event = session.pollEvent() {
            switch event {
            case .joined: isJoined = true
            case .member(_, let user, _, let present):
                if present { presentUsers.insert(user) } else { presentUsers.remove(user) }
            case .delivered(let batch): onDelivered(batch.commands, loop.now)
            case .refused(let reason, let text): failure = failure ?? "join refused (\(reason)): \(text)"
            case .error(let code, _, let text): failure = failure ?? "error \(code): \(text)"
            case .goingAway(let reason, let text): failure = failure ?? "going away (\(reason)): \(text)"
            case .disconnected(let reason): failure = failure ?? "disconnected: \(reason)"
            case .protocolError(let text): failure = failure ?? "protocol error: \(text)"
            default: break
            }
        }
        if let deadline = session.pollTimeout() {
            timer.start(atMicroseconds: deadline.microseconds) { [unowned self] in
                session.handleTimeout(now: Instant(microseconds: loop.now))
                pump()
            }
        } else {
            timer.stop()
        }
    }

    func close() {
        timer.close()
        udp?.close()
        tcp?.close()
    }
}

/// An ENet baseline member: `ENetMember` woken by its socket (and a service tick for ENet's own
/// timers) on the run's loop. Batches carry the compact binary codec, encoded against the
/// drawer's state and decoded in order against each watcher's (ENet delivers reliably, in order).
final class ENetLossMember: LossMember {
    /// ENet's timers (retransmission, acknowledgement flushing) are serviced at least this often.
    static let serviceIntervalMicroseconds: UInt64 = 5_000
    /// How long one connect or join may take, and how many fresh tries a member gets.
    static let joinTimeoutMs: UInt32 = 10_000
    static let joinAttempts = 3
    /// The author id every ENet batch carries (the ENet relay has no member ids).
    static let author = AuthorID(1)

    var onDelivered: ([TimedCommand], UInt64) -> Void = { _, _ in }
    private(set) var isJoined = false
    private(set) var failure: String?
    var author: AuthorID? { isJoined ? ENetLossMember.author : nil }

    private let member: ENetMember
    private let poll: Poll
    private let tick: LoopTimer
    private var encodeState = BinaryCodecState()
    private var decodeState = BinaryCodecState()

    /// Connects and joins, running `pump` while it waits (the impairment proxy lives on the
    /// same loop). Must not be called from inside a loop callback.
    init(loop: EventLoop, server: SocketAddress, room: String, pump: @escaping () -> Void) throws {
        // At high loss ENet's handshake or join can time out: try again with a fresh host.
        var attempt = 1
        var joined: ENetMember?
        while joined == nil {
            do {
                let candidate = try ENetMember(host: server.host, port: server.port, timeoutMs: ENetLossMember.joinTimeoutMs, pump: pump)
                try candidate.join(room: room, timeoutMs: ENetLossMember.joinTimeoutMs, pump: pump)
                joined = candidate
            } catch {
                guard attempt < ENetLossMember.joinAttempts, lossBenchStopRequested == 0 else { throw error }
                attempt += 1
            }
        }
        member = joined!
        isJoined = true
        poll = try Poll(loop: loop, fd: member.socketDescriptor)
        tick = try LoopTimer(loop: loop)
        try poll.start(.readable) { [unowned self] _, _ in service() }
        tick.start(afterMicroseconds: ENetLossMember.serviceIntervalMicroseconds,
                   repeatingEveryMicroseconds: ENetLossMember.serviceIntervalMicroseconds) { [unowned self] in service() }
    }

    func send(_ commands: [TimedCommand]) {
        do {
            let bytes = try BinaryBatchCodec.encode(Batch(author: ENetLossMember.author, commands: commands), state: &encodeState)
            try member.send(batch: bytes)
        } catch {
            failure = failure ?? "send: \(error)"
        }
        service()
    }

    private func service() {
        member.service(timeoutMs: 0)
        if member.disconnected { failure = failure ?? "disconnected by the relay" }
        for received in member.takeReceived() {
            do {
                let batch = try BinaryBatchCodec.decode(received.bytes, state: &decodeState)
                onDelivered(batch.commands, received.receivedAtNanoseconds / 1000)
            } catch {
                failure = failure ?? "undecodable batch: \(error)"
            }
        }
    }

    func close() {
        poll.close()
        tick.close()
    }
}
