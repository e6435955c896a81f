import InkClient
import InkCodec
import InkProtocol
import InkUV

/// What the fanout and bridge loads give their members: the loop, the shared timer wheel, room
/// names, and where a member reports joins and checked deliveries.
protocol MemberLoad: AnyObject {
    var loop: EventLoop { get }
    var wheel: FanoutWheel { get }
    /// How members of daemon `daemon` seal their sessions (its key; OpenSSL or the unsealed
    /// baseline).
    func security(daemon: Int) -> BenchSecurity
    func roomName(_ room: Int) -> String
    func watcherJoined()
    func matches(room: Int, roomSeq: UInt64, commands: [TimedCommand]) -> Bool
    func delivered(room: Int, daemon: Int, roomSeq: UInt64, at now: UInt64)
}

/// A watching member as light as the protocol allows: a sealed datagram session (its handshake
/// carries the join) and the session-message decoder, no board. It checks what it gets: room
/// batches in `roomSeq` order from 1, each decoding (against its own codec state) to the
/// commands the drawer sent.
final class FanoutWatcher: FanoutTimed {
    let room: Int
    /// The daemon it is connected to (0 when there is one).
    let daemon: Int
    let connectionID: UInt64
    private let arq: SealedDatagramSession
    // The load owns its members and outlives them; unowned(unsafe) spares the reference
    // count check of every `load.` access (several per delivery).
    private unowned(unsafe) let load: any MemberLoad
    private let socket: any WatcherOutput
    var wheelMs = UInt64.max
    private(set) var joined = false
    /// The next room sequence number expected.
    private(set) var nextRoomSeq: UInt64 = 1
    /// Batches out of order, undecodable or with other commands than sent.
    private(set) var errors = 0
    private var codec = BinaryCodecState()
    /// The room's checked batches (nil: decode every batch).
    private let reference: FanoutBatchReference?
    /// Whether `codec` is the reference's state before `nextRoomSeq` (see `FanoutBatchReference`).
    private var inStep = true
    /// When it last sent a message: a watcher says `ping` every `SessionKeepalive.interval`, as
    /// a real device does, or the daemon closes it as gone.
    private var lastSentAt: UInt64

    init(room: Int, daemon: Int = 0, user: String, origin: UInt64, connectionID: UInt64, socket: any WatcherOutput,
         reference: FanoutBatchReference? = nil, load: any MemberLoad, now: UInt64) {
        self.room = room
        self.daemon = daemon
        self.connectionID = connectionID
        self.socket = socket
        self.reference = reference
        self.load = load
        lastSentAt = now
        let join = ClientMessage.join(JoinRequest(room: load.roomName(room), user: user, role: .viewer, origin: origin))
        let security = load.security(daemon: daemon)
        arq = SealedDatagramSession(deviceConnectionID: connectionID, serverKey: security.serverKey, join: SessionMessageCodec.encode(join),
                                    crypto: security.crypto, now: Instant(microseconds: now))
        pump(now: now, arrivedAt: now)
    }

    /// `arrivedAt`: when the datagram reached the watcher's socket, if the load read it later
    /// (what a delivery's latency is measured to); `now` by default.
    func receive(_ datagram: [UInt8], now: UInt64, arrivedAt: UInt64? = nil) {
        arq.handleDatagram(datagram, now: Instant(microseconds: now))
        pump(now: now, arrivedAt: arrivedAt ?? now)
    }

    func fire(now: UInt64) {
        arq.handleTimeout(now: Instant(microseconds: now))
        if joined, now >= lastSentAt + SessionKeepalive.interval.microseconds {
            lastSentAt = now
            try? arq.send(SessionMessageCodec.encode(ClientMessage.ping))
        }
        pump(now: now, arrivedAt: now)
    }

    private func pump(now: UInt64, arrivedAt: UInt64) {
        let instant = Instant(microseconds: now)
        while let d = arq.pollTransmit(now: instant) { socket.transmit(d.bytes) }
        var delivered = false
        while let event = arq.pollEvent() {
            if case .delivered(let bytes) = event {
                handle(bytes, arrivedAt: arrivedAt)
                delivered = true
            }
        }
        // Taking messages may reopen the receive window, which the ARQ acknowledges at once.
        if delivered { while let d = arq.pollTransmit(now: instant) { socket.transmit(d.bytes) } }
        var deadline = arq.pollTimeout()?.microseconds
        if joined {
            let ping = lastSentAt + SessionKeepalive.interval.microseconds
            deadline = min(deadline ?? ping, ping)
        }
        load.wheel.schedule(self, deadline: deadline)
    }

    private func handle(_ bytes: [UInt8], arrivedAt: UInt64) {
        guard let message = try? SessionMessageCodec.decodeServer(bytes) else {
            errors += 1
            return
        }
        switch message {
        case .joinAccepted:
            if !joined { load.watcherJoined() }
            joined = true
        case .roomBatch(let batch):
            guard batch.roomSeq == nextRoomSeq else {
                errors += 1
                inStep = false
                return
            }
            let known = inStep ? reference?.find(roomSeq: batch.roomSeq, payload: batch.payload) : nil
            if case .match(let after) = known {
                // The same bytes from the same codec state: the commands already checked.
                codec = after
            } else {
                guard let decoded = try? BinaryBatchCodec.decode(batch.payload, state: &codec),
                      load.matches(room: room, roomSeq: batch.roomSeq, commands: decoded.commands) else {
                    errors += 1
                    inStep = false
                    return
                }
                if case .unrecorded = known {
                    reference?.record(roomSeq: batch.roomSeq, payload: batch.payload, after: codec)
                } else {
                    inStep = false
                }
            }
            nextRoomSeq += 1
            load.delivered(room: room, daemon: daemon, roomSeq: batch.roomSeq, at: arrivedAt)
        case .joinRefused, .goingAway:
            errors += 1
        default:
            break
        }
    }
}

/// The drawing member of a room: a full `ClientSession` (teacher) on its own connected socket.
final class FanoutDrawer: FanoutTimed {
    let room: Int
    /// The daemon it draws through (0 when there is one).
    let daemon: Int
    let session: ClientSession
    let socket: UDPSocket
    // The load owns its members and outlives them; unowned(unsafe) spares the reference
    // count check of every `load.` access (several per delivery).
    private unowned(unsafe) let load: any MemberLoad
    var wheelMs = UInt64.max
    var schedule: FanoutSchedule
    private(set) var joined = false
    /// The highest `originSeq` acknowledged durable.
    private(set) var acknowledged: UInt64 = 0
    private(set) var errors = 0

    init(room: Int, daemon: Int = 0, server: SocketAddress, connectionID: UInt64, schedule: FanoutSchedule, load: any MemberLoad, now: UInt64) throws {
        self.room = room
        self.daemon = daemon
        self.schedule = schedule
        self.load = load
        socket = try UDPSocket(loop: load.loop, bindTo: .loopbackIPv4(port: 0))
        try socket.connect(to: server)
        try? socket.setReceiveBufferSize(1 << 20)
        let configuration = ClientConfiguration(room: load.roomName(room), user: "drawer", role: .teacher, origin: UInt64(1_000_000 + room),
                                                serverKey: load.security(daemon: daemon).serverKey)
        session = ClientSession(configuration, transport: .datagram(connectionID: connectionID), crypto: load.security(daemon: daemon).crypto,
                                now: Instant(microseconds: now))
        try socket.startReceiving { [unowned self] buffer, _ in
            let now = self.load.loop.now
            self.session.handleDatagram(Array(buffer), now: Instant(microseconds: now))
            self.pump(now: now)
        }
        pump(now: now)
    }

    /// Hands the batch to the session and its datagram to the socket; returns when that was.
    func draw(_ commands: [TimedCommand], now: UInt64) -> UInt64? {
        guard (try? session.send(commands, now: Instant(microseconds: now))) != nil else {
            errors += 1
            return nil
        }
        let handedAt = load.loop.now
        pump(now: handedAt)
        return handedAt
    }

    /// Draws every batch of the schedule that fell due by `elapsed`, noting each one's trace
    /// batch index and when it was handed to the socket.
    func drawDue(elapsed: UInt64, batches: inout [Int32], handedAt: inout [UInt64]) {
        while let commands = schedule.due(elapsed: elapsed) {
            let index = schedule.next - 1
            guard let at = draw(commands, now: load.loop.now) else { break }
            batches.append(Int32(index))
            handedAt.append(at)
        }
    }

    func fire(now: UInt64) {
        session.handleTimeout(now: Instant(microseconds: now))
        pump(now: now)
    }

    private func pump(now: UInt64) {
        let instant = Instant(microseconds: now)
        while let d = session.pollTransmit(now: instant) { _ = try? socket.send(d) }
        while let event = session.pollEvent() {
            switch event {
            case .joined: joined = true
            case .acknowledged(let originSeq, _): acknowledged = max(acknowledged, originSeq)
            case .error, .refused, .goingAway, .protocolError: errors += 1
            default: break
            }
        }
        load.wheel.schedule(self, deadline: session.pollTimeout()?.microseconds)
    }

    func close() { socket.close() }
}
