import InkClient
import InkCodec
import InkProtocol
import InkRelay

/// `ClientSession`s against one in-process `Relay` under a virtual clock. Each client has a
/// daemon-side end, sealed as the daemon's (`FakeCrypto`: the protocol, not the secrecy, is
/// under test here): a `SealedDatagramSession` or a `SealedStreamSession` behind a
/// `StreamFrameDecoder`, each made from the client's handshake. The store is instant: every
/// `.append` is reported durable at once. Nothing is lost unless a test says so.
final class ClientRelayHarness {
    static let crypto = FakeCrypto(seed: 7)
    static let staticKey = StaticKeyPair(privateKey: crypto.randomBytes(32), crypto: crypto)

    final class Client {
        let session: ClientSession
        var sessionID: SessionID
        var isDatagram = true
        var serverDatagram: SealedDatagramSession?
        var serverStream: SealedStreamSession?
        var serverDecoder = StreamFrameDecoder(maxFrameBytes: 1 << 20)
        var events: [ClientEvent] = []
        /// While false, nothing moves between the client and the relay (link down).
        var connected = true
        /// When it holds for an event, the link goes down right after that event.
        var cutWhen: ((ClientEvent) -> Bool)?

        /// Takes the session's events; applies `cutWhen`.
        func collect() {
            while let e = session.pollEvent() {
                events.append(e)
                if cutWhen?(e) == true {
                    connected = false
                    cutWhen = nil
                }
            }
        }
        init(session: ClientSession, sessionID: SessionID) {
            self.session = session
            self.sessionID = sessionID
        }

        /// Every command delivered to this client, in order.
        var deliveredCommands: [TimedCommand] {
            events.flatMap { e -> [TimedCommand] in
                if case .delivered(let b) = e { return b.commands }
                return []
            }
        }
    }

    var now = Instant.milliseconds(1000)
    let relay: Relay
    private(set) var clients: [Client] = []
    private var nextSession: UInt64 = 1
    private var nextConnection: UInt64 = 100

    /// Bound on rounds of one `run` (each moves every pending datagram, frame and output once).
    static let maxRounds = 200_000

    init(limits: RelayLimits = RelayLimits()) {
        relay = Relay(configuration: RelayConfiguration(limits: limits, wallClockAtZeroMs: 1_700_000_000_000))
    }

    func transport(_ datagram: Bool) -> ClientTransport {
        nextConnection += 1
        return datagram ? .datagram(connectionID: nextConnection) : .stream
    }

    @discardableResult
    func join(room: String = "r", user: String, role: MemberRole, datagram: Bool = true,
              have: JoinHave = .nothing, origin: UInt64? = nil) -> Client {
        var config = ClientConfiguration(room: room, user: user, role: role, origin: origin ?? UInt64(clients.count + 1) * 7919,
                                         serverKey: ClientRelayHarness.staticKey.publicKey)
        config.initialHave = have
        let t = transport(datagram)
        let session = ClientSession(config, transport: t, crypto: ClientRelayHarness.crypto, now: now)
        let client = Client(session: session, sessionID: openServerEnd(t))
        client.isDatagram = datagram
        clients.append(client)
        return client
    }

    private func openServerEnd(_ t: ClientTransport) -> SessionID {
        let id = SessionID(nextSession)
        nextSession += 1
        if case .datagram = t {
            relay.handleSessionOpened(id, transport: .udp, confirmed: false, now: now)
        } else {
            relay.handleSessionOpened(id, transport: .tcp, confirmed: false, now: now)
        }
        return id
    }

    /// The daemon's end takes one datagram or stream message from the client.
    private func serverReceive(_ c: Client, _ bytes: [UInt8]) {
        if c.isDatagram {
            if let s = c.serverDatagram {
                s.handleDatagram(bytes, now: now)
            } else if case .success(let (s, join)) = SealedDatagramSession.accept(
                initiation: bytes, staticKey: ClientRelayHarness.staticKey,
                reset: StatelessReset(staticPrivateKey: ClientRelayHarness.staticKey.privateKey, crypto: ClientRelayHarness.crypto),
                crypto: ClientRelayHarness.crypto, now: now) {
                c.serverDatagram = s
                relay.handleMessage(join, from: c.sessionID, now: now)
            }
            return
        }
        c.serverDecoder.handleBytes(bytes)
        while let frame = try? c.serverDecoder.pollFrame() {
            if let s = c.serverStream {
                try? s.handleMessage(frame, now: now)
            } else if case .success(let (s, join)) = SealedStreamSession.accept(initiation: frame, staticKey: ClientRelayHarness.staticKey,
                                                                                 crypto: ClientRelayHarness.crypto, now: now) {
                c.serverStream = s
                relay.handleMessage(join, from: c.sessionID, now: now)
            }
        }
    }

    /// The daemon's end's events (messages to the relay) and output (to the client).
    @discardableResult
    private func serverPump(_ c: Client) -> Bool {
        var moved = false
        while let e = c.serverDatagram?.pollEvent() ?? c.serverStream?.pollEvent() {
            moved = true
            switch e {
            case .delivered(let m): relay.handleMessage(m, from: c.sessionID, now: now)
            case .confirmed: relay.handleSessionConfirmed(c.sessionID, now: now)
            default: break
            }
        }
        return moved
    }

    private func serverTransmit(_ c: Client) -> Bool {
        var moved = false
        while let d = c.serverDatagram?.pollTransmit(now: now) {
            moved = true
            if c.connected {
                c.session.handleDatagram(d.bytes, now: now)
                c.collect()
            }
        }
        while let m = c.serverStream?.pollMessage() {
            moved = true
            if c.connected {
                c.session.handleStreamBytes(StreamFrameDecoder.frame(m), now: now)
                c.collect()
            }
        }
        return moved
    }

    /// The client's link dies (its relay session is closed) and comes back on a new one.
    func reconnect(_ client: Client, datagram: Bool = true) {
        relay.handleSessionClosed(client.sessionID, now: now)
        drainRelay()
        let t = transport(datagram)
        client.session.reconnect(t, now: now)
        client.sessionID = openServerEnd(t)
        client.serverDatagram = nil
        client.serverStream = nil
        client.isDatagram = datagram
        client.serverDecoder = StreamFrameDecoder(maxFrameBytes: 1 << 20)
        client.connected = true
    }

    /// Moves everything until `done` holds (true) or the bound passes (false). Time jumps to
    /// the next deadline whenever nothing is in flight.
    @discardableResult
    func run(until done: () -> Bool) -> Bool {
        for _ in 0..<ClientRelayHarness.maxRounds {
            if done() { return true }
            if !step() {
                guard let next = nextDeadline() else { return done() }
                now = max(now, next)
                for c in clients {
                    c.session.handleTimeout(now: now)
                    c.serverDatagram?.handleTimeout(now: now)
                }
                relay.handleTimeout(now: now)
            }
        }
        return done()
    }

    /// Moves everything that can move without advancing the clock.
    func settle() {
        var rounds = 0
        while rounds < ClientRelayHarness.maxRounds && step() { rounds += 1 }
    }

    private func nextDeadline() -> Instant? {
        var deadlines: [Instant] = []
        for c in clients where c.connected {
            if let t = c.session.pollTimeout() { deadlines.append(t) }
            if let t = c.serverDatagram?.pollTimeout() { deadlines.append(t) }
        }
        return deadlines.min()
    }

    /// One round; false when nothing moved.
    private func step() -> Bool {
        var moved = false
        for c in clients {
            let before = c.events.count
            c.collect()
            if c.events.count > before { moved = true }
            while let bytes = c.session.pollTransmit(now: now) {
                moved = true
                guard c.connected else { continue }
                serverReceive(c, bytes)
            }
            if serverPump(c) { moved = true }
        }
        if drainRelay() { moved = true }
        for c in clients where serverTransmit(c) { moved = true }
        return moved
    }

    @discardableResult
    private func drainRelay() -> Bool {
        var moved = false
        while let o = relay.pollOutput() {
            moved = true
            switch o {
            case .send(let id, let message):
                guard let c = clients.first(where: { $0.sessionID == id }) else { continue }
                let bytes = SessionMessageCodec.encode(message)
                if let s = c.serverDatagram {
                    try? s.send(bytes)
                } else if let s = c.serverStream {
                    s.send(bytes, now: now)
                    _ = serverTransmit(c)
                }
            case .append(let record):
                relay.handleDurable(room: record.room, upTo: record.roomSeq, now: now)
            case .close, .event, .legacy:
                break
            }
        }
        return moved
    }
}

/// A small lesson: `strokes` strokes of `points` points with a pen change, an undo and a redo,
/// times on a 60 Hz grid.
func syntheticLesson(strokes: Int, points: Int) -> [TimedCommand] {
    var out: [TimedCommand] = []
    var t: UInt64 = 0
    for s in 1...strokes {
        out.append(TimedCommand(timeMs: t, command: .penStyle(PenStyle(color: UInt8(s % 5), width: UInt8(1 + s % 3))!)))
        for p in 0..<points {
            let phase: StrokePhase = p == 0 ? .start : (p == points - 1 ? .end : .move)
            let point = StrokePoint(stroke: StrokeID(UInt32(s)), phase: phase, x: Int32(s * 1000 + p * 37), y: Int32(500_000 - p * 41))
            out.append(TimedCommand(timeMs: t, command: .point(point)))
            t += 17
        }
        if s % 4 == 0 {
            out.append(TimedCommand(timeMs: t, command: .undo(StrokeID(UInt32(s)))))
            out.append(TimedCommand(timeMs: t + 5, command: .redo(StrokeID(UInt32(s)))))
        }
        t += 200
    }
    return out
}
