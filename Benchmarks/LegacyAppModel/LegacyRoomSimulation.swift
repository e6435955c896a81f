// One room in virtual time: the pure relay, a `LegacySession` per app, the app models, and
// TCP-like links between them with latency and the apps' own read pacing. Seeded.
import InkCodec
import InkLegacy
import InkProtocol
import InkRelay
import InkSim

/// A deterministic run of legacy apps (and native authors) in one room. One seed decides every
/// latency, read pause and screen-load delay; the same seed replays the run exactly.
///
/// Links: what a session writes reaches its app's socket buffer after the link's latency, in
/// order, one chunk as one segment; the app reads `min(1030, available)` after a random pause
/// (`readPause`), and at most `unreadWindow` bytes are ever unread (the TCP window: the session
/// is polled only while there is room, as the daemon does). The app's writes reach the session
/// after the latency, each flush at one instant.
public final class LegacyRoomSimulation {
    public struct Configuration: Sendable {
        public var room = "lesson"
        /// One-way link latency: `latency` plus up to `jitter` (order kept).
        public var latency = Instant.Duration.milliseconds(1)
        public var jitter = Instant.Duration.milliseconds(2)
        /// Pause before each read: up to `readPause`, and with `stallPercent` a stall up to `stall`.
        public var readPause = Instant.Duration.milliseconds(3)
        public var stallPercent = 2
        public var stall = Instant.Duration.milliseconds(80)
        /// Bytes a session may have written that its app has not read.
        public var unreadWindow = 64 * 1024
        /// Screen-load delay of each app: drawn up to this (the session waits `screenWait`).
        public var screenLoadDelay = Instant.Duration.milliseconds(400)
        /// Liveness check of each app: 7 s or 9 s, drawn per app.
        public var livenessIntervals: [Instant.Duration] = [.milliseconds(7000), .milliseconds(9000)]
        public var session = LegacySessionConfiguration()

        public init() {}
    }

    /// One app with its session and link.
    public final class Device {
        public let name: String
        public let app: HYWhiteboardApp
        public let session: LegacySession
        public var script: LegacyTraceScript?
        let id: SessionID
        var toApp: [(at: Instant, bytes: [UInt8])] = []
        var toSession: [(at: Instant, bytes: [UInt8])] = []
        var buffer: [UInt8] = []
        var nextRead: Instant?
        var inFlight = 0
        var originSeq: UInt64 = 0
        var lastToApp = Instant.zero
        var lastToSession = Instant.zero
        public internal(set) var sessionClosed: LegacyCloseReason?
        public internal(set) var refusals: [String] = []
        /// When the app's screen first equalled `target` (see `watch`).
        public var reachedAt: Instant?
        public var target: LegacyAppScreen?

        init(name: String, app: HYWhiteboardApp, session: LegacySession, id: SessionID) {
            self.name = name
            self.app = app
            self.session = session
            self.id = id
        }
    }

    public let configuration: Configuration
    public let relay: Relay
    public private(set) var now = Instant.zero
    public private(set) var devices: [Device] = []
    private var rng: SimRandom
    private var nextSession: UInt64 = 1
    /// Actions scheduled at instants (native authors' commands, apps joining...), in time order.
    private var scheduled: [(at: Instant, seq: Int, action: () -> Void)] = []
    private var scheduledCount = 0

    /// Runs `action` at `t` (in the order scheduled among equal times).
    public func at(_ t: Instant, _ action: @escaping () -> Void) {
        scheduledCount += 1
        scheduled.append((t, scheduledCount, action))
        scheduled.sort { $0.at == $1.at ? $0.seq < $1.seq : $0.at < $1.at }
    }

    private var natives: [SessionID: (origin: UInt64, seq: UInt64, codec: BinaryCodecState, translator: LegacyTranslator)] = [:]

    public init(seed: UInt64, configuration: Configuration = Configuration()) {
        self.configuration = configuration
        rng = SimRandom(seed: seed)
        relay = Relay(configuration: RelayConfiguration(wallClockAtZeroMs: 1_000_000))
    }

    // MARK: setting up

    /// An app that connects now (client mode: the user typed the relay's address).
    @discardableResult
    public func connectApp(_ name: String, mode: HYWhiteboardApp.Mode = .client) -> Device {
        var appConfig = HYWhiteboardApp.Configuration()
        appConfig.mode = mode
        appConfig.screenLoadDelay = Instant.Duration(microseconds: rng.below(configuration.screenLoadDelay.microseconds + 1))
        appConfig.livenessInterval = configuration.livenessIntervals[Int(rng.below(UInt64(configuration.livenessIntervals.count)))]
        let app = HYWhiteboardApp(configuration: appConfig)
        let id = SessionID(nextSession)
        nextSession += 1
        let device = Device(name: name, app: app, session: LegacySession(configuration: configuration.session, now: now), id: id)
        devices.append(device)
        app.handleConnected(now: now)
        relay.handleSessionOpened(id, transport: .legacy, now: now)
        relay.handle(.join(JoinRequest(room: configuration.room, user: name, role: .presenter, origin: 0x1_0000_0000 | id.rawValue)), from: id, now: now)
        drainRelay()
        pump(device)
        return device
    }

    /// A native author (a teacher's tablet with the native client): joins now.
    public func joinNative(_ name: String, role: MemberRole = .teacher) -> SessionID {
        let id = SessionID(nextSession)
        nextSession += 1
        let origin = 0x2_0000_0000 | id.rawValue
        relay.handleSessionOpened(id, transport: .udp, now: now)
        relay.handle(.join(JoinRequest(room: configuration.room, user: name, role: role, origin: origin)), from: id, now: now)
        natives[id] = (origin, 0, BinaryCodecState(), LegacyTranslator(author: AuthorID(0)))
        drainRelay()
        return id
    }

    /// Commands of a native author, as one batch now.
    public func nativeSubmit(_ id: SessionID, _ commands: [Command]) {
        guard var n = natives[id], !commands.isEmpty else { return }
        n.seq += 1
        let batch = Batch(author: AuthorID(0), commands: commands.map { TimedCommand(timeMs: now.microseconds / 1000, command: $0) })
        guard let payload = try? BinaryBatchCodec.encode(batch, state: &n.codec) else { return }
        natives[id] = n
        relay.handle(.batch(originSeq: n.seq, payload: payload), from: id, now: now)
        drainRelay()
    }

    /// A native author drawing the messages of a trace (the app's text mapped to the model as a
    /// legacy author would: one stroke per start, undo/redo of its own last lines).
    public func nativeDraw(_ id: SessionID, _ messages: [LegacyMessage]) {
        guard var n = natives[id] else { return }
        let commands = messages.map { n.translator.command(from: $0) }
        natives[id] = n
        nativeSubmit(id, commands)
    }

    /// Fills the room with `lines` drawn by a native author, in 60 ms batches, at once.
    public func preload(_ lines: [TraceLine], author name: String = "teacher") {
        let id = joinNative(name)
        var batch: [LegacyMessage] = []
        var window: UInt64?
        for line in lines {
            if let w = window, line.timeMs / Batch.liveFlushMs != w { nativeDraw(id, batch); batch = [] }
            window = line.timeMs / Batch.liveFlushMs
            batch.append(line.message)
        }
        nativeDraw(id, batch)
    }

    // MARK: running

    /// Runs until `deadline` (or until `done` holds, checked after every step).
    public func run(until deadline: Instant, done: () -> Bool = { false }) {
        var spins = 0
        while now < deadline {
            if done() { return }
            guard let next = nextEventTime(), next <= deadline else {
                now = deadline
                step()
                return
            }
            spins = next <= now ? spins + 1 : 0
            precondition(spins < 100_000, "simulation makes no progress at \(now): \(devices)")
            now = max(now, next)
            step()
        }
    }

    /// Runs until every device's script is done and nothing is in flight, or `limit`.
    public func runToQuiet(limit: Instant) {
        run(until: limit) {
            scheduled.isEmpty && devices.allSatisfy { d in (d.script?.isDone ?? true) && d.toApp.isEmpty && d.toSession.isEmpty && d.buffer.isEmpty }
                && quietSince.map { now.since($0) > configuration.session.quietAfterInput + configuration.session.staleStroke } == true
        }
    }
    private var quietSince: Instant?

    private func nextEventTime() -> Instant? {
        var t: Instant?
        func consider(_ x: Instant?) { if let x, t == nil || x < t! { t = x } }
        consider(scheduled.first?.at)
        for d in devices {
            consider(d.toApp.first?.at)
            consider(d.toSession.first?.at)
            consider(d.nextRead)
            consider(d.app.pollTimeout())
            if d.sessionClosed == nil { consider(d.session.pollTimeout()) }
            if d.app.isScreenUp { consider(d.script?.nextAt) }
        }
        return t
    }

    private func step() {
        var active = false
        while let first = scheduled.first, first.at <= now {
            scheduled.removeFirst()
            first.action()
            active = true
        }
        for d in devices {
            while let first = d.toApp.first, first.at <= now {
                d.toApp.removeFirst()
                d.buffer.append(contentsOf: first.bytes)
                if d.nextRead == nil { d.nextRead = now + readPause() }
            }
            var arrived: [UInt8] = []
            while let first = d.toSession.first, first.at <= now {
                d.toSession.removeFirst()
                arrived.append(contentsOf: first.bytes)
            }
            if !arrived.isEmpty && d.sessionClosed == nil {
                d.session.handleBytes(arrived, now: now)
                active = true
            }
            if let at = d.nextRead, at <= now {
                let n = min(HYReceiver.readBytes, d.buffer.count)
                if n > 0 {
                    d.app.handleRead(Array(d.buffer.prefix(n)), now: now)
                    d.buffer.removeFirst(n)
                    d.inFlight -= n
                }
                d.nextRead = d.buffer.isEmpty ? nil : now + readPause()
            }
            if let t = d.app.pollTimeout(), t <= now { d.app.handleTimeout(now: now) }
            if d.app.isScreenUp, d.script != nil {
                if let at = d.script?.nextAt, at <= now { active = true }
                d.script!.perform(on: d.app, now: now)
            }
            if d.sessionClosed == nil, let t = d.session.pollTimeout(), t <= now { d.session.handleTimeout(now: now) }
        }
        for d in devices { pump(d) }
        if active { quietSince = now } else if quietSince == nil { quietSince = now }
        for d in devices where d.reachedAt == nil {
            if let target = d.target, d.app.screen == target { d.reachedAt = now }
        }
    }

    /// Moves a device's pending bytes and events: app writes onto the link, session events to
    /// the relay, session chunks onto the link while the window has room.
    private func pump(_ d: Device) {
        while let w = d.app.pollWrite() {
            d.lastToSession = max(d.lastToSession, now + linkDelay())
            d.toSession.append((d.lastToSession, w))
        }
        if !d.app.isRunning && d.sessionClosed == nil {
            // The app dropped the link (or crashed): the connection closes.
            d.sessionClosed = .silent(milliseconds: 0)
            relay.handleSessionClosed(d.id, now: now)
            drainRelay()
        }
        drainSession(d)
        guard d.sessionClosed == nil else { return }
        while d.inFlight + LegacySessionLimits.chunkBytes <= configuration.unreadWindow, let chunk = d.session.pollTransmit(now: now) {
            d.inFlight += chunk.count
            d.lastToApp = max(d.lastToApp, now + linkDelay())
            d.toApp.append((d.lastToApp, chunk))
        }
    }

    private func drainSession(_ d: Device) {
        while let e = d.session.pollEvent() {
            switch e {
            case .submit(let commands):
                d.originSeq += 1
                relay.handleLegacyCommands(commands, originSeq: d.originSeq, from: d.id, now: now)
                drainRelay()
            case .close(let reason):
                d.sessionClosed = reason
                d.app.handlePeerClosed(now: now)
                relay.handleSessionClosed(d.id, now: now)
                drainRelay()
            }
        }
    }

    private func drainRelay() {
        while let o = relay.pollOutput() {
            switch o {
            case .legacy(let s, let delivery):
                guard let d = devices.first(where: { $0.id == s }) else { continue }
                switch delivery {
                case .joined(let author, _, let board, _): d.session.handleJoined(author: author, board: board, now: now)
                case .batch(_, let author, let commands, let own): d.session.handleRoomBatch(author: author, commands: commands, own: own, now: now)
                }
            case .send(let s, .error(let code, _, let text)):
                devices.first(where: { $0.id == s })?.refusals.append("\(code): \(text)")
            case .append(let record):
                relay.handleDurable(room: record.room, upTo: record.roomSeq, now: now)
            case .send, .close, .event:
                break
            }
        }
    }

    private func linkDelay() -> Instant.Duration {
        configuration.latency + Instant.Duration(microseconds: rng.below(configuration.jitter.microseconds + 1))
    }

    private func readPause() -> Instant.Duration {
        if rng.below(100) < UInt64(configuration.stallPercent) {
            return Instant.Duration(microseconds: rng.below(configuration.stall.microseconds + 1))
        }
        return Instant.Duration(microseconds: rng.below(configuration.readPause.microseconds + 1))
    }
}

extension LegacyRoomSimulation.Device: CustomStringConvertible {
    public var description: String {
        "\(name): app \(app.state), \(app.screen), desync \(app.desync ?? "none"), touches ignored \(app.touchesIgnored), session \(session.stats)"
    }
}
