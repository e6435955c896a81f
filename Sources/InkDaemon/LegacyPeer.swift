import InkCodec
import InkProtocol
import InkRelay
import InkUV

/// One connected HYWhiteboard app (docs/legacy-hywhiteboard.md), a relay member like any other.
///
/// - Framing: `LegacyFrameDecoder` over every read; a broken stream closes this peer only.
/// - Heartbeats: `27 11` every `heartbeatMicroseconds`; a peer that sends no heartbeat for
///   `timeoutMicroseconds` is dropped (data frames do not count, as in the app).
/// - Inbound: the daemon joins the listener's room for the app (as a presenter named
///   `legacy-N@ADDRESS`); the text messages of one read become one batch.
/// - Outbound: sync chunks and live batches of other authors go through its `LegacyTranslator`;
///   when the translator cannot express a change it repaints the app from this peer's own fold
///   of what it was sent. A snapshot sync starts with a clear, so on connect the app shows
///   exactly the room's board.
final class LegacyPeer: RelaySessionTransport {
    let connection: TCPConnection
    let room: String
    let number: UInt64
    private let context: LegacyContext
    private let onClosed: (LegacyPeer) -> Void
    private var decoder = LegacyFrameDecoder()
    private var translator: LegacyTranslator?
    /// What the app has been sent and drawn, folded: the source of a repaint.
    private var board = Board()
    private var liveCodec = BinaryCodecState()
    private var session: SessionID?
    private var timer: LoopTimer?
    private var lastHeartbeatHeard: UInt64 = 0
    private var nextHeartbeatSend: UInt64 = 0
    private var originSeq: UInt64 = 0
    private var remote = "?"
    private var closed = false
    private var counted = false
    /// The relay was told to hold back (the app reads slower than the room draws).
    private var blocked = false
    /// Queued bytes above which the relay holds back this device (it resyncs it later).
    static let backpressureHighBytes = 1 << 20

    init(connection: TCPConnection, room: String, number: UInt64, context: LegacyContext, onClosed: @escaping (LegacyPeer) -> Void) {
        self.connection = connection
        self.room = room
        self.number = number
        self.context = context
        self.onClosed = onClosed
    }

    private var origin: UInt64 { context.originBase | number }

    func start() {
        remote = connection.remoteAddress?.description ?? "?"
        try? connection.setNoDelay(true)
        let now = context.loop.now
        lastHeartbeatHeard = now
        nextHeartbeatSend = now + context.heartbeatMicroseconds
        do {
            timer = try LoopTimer(loop: context.loop)
            try connection.startReading({ [weak self] bytes in self?.received(bytes) },
                                        onEnd: { [weak self] error in self?.close(reason: error.map { "read failed: \($0)" } ?? "device closed the connection") })
        } catch {
            close(reason: "setup failed: \(error)")
            return
        }
        connection.onError = { [weak self] error in self?.close(reason: "write failed: \(error)") }
        connection.onDrain = { [weak self] in
            guard let self, self.blocked, let session = self.session else { return }
            self.blocked = false
            self.context.driver.ready(session)
        }
        context.metrics.sessions.labels("legacy").add(1)
        counted = true
        let session = context.driver.open(self, kind: .legacy)
        self.session = session
        guard !closed else { return }
        context.driver.authorizer.trust(origin)
        // User names carry no ':' (the relay's author label separator).
        let user = "legacy-\(number)@" + String(remote.map { $0 == ":" ? "_" : $0 })
        let join = JoinRequest(room: room, user: user, role: .presenter, origin: origin, have: .nothing)
        context.driver.handle(.join(join), from: session)
        context.driver.authorizer.forget(origin)
        armTimer()
    }

    // MARK: inbound

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        context.metrics.bytesReceived.labels("legacy").increment(by: UInt64(bytes.count))
        var commands: [TimedCommand] = []
        let nowMs = WallClock.milliseconds()
        do {
            try decoder.handleBytes(bytes)
            while let frame = try decoder.pollFrame() {
                switch frame {
                case .heartbeat:
                    lastHeartbeatHeard = context.loop.now
                case .data(let command, let payload) where command == LegacyFrame.textCommand:
                    guard var translator else { continue }  // not joined (yet): nothing to draw as
                    do {
                        let message = try LegacyMessage(parsing: payload[...])
                        commands.append(translator.timedCommand(from: message, timeMs: nowMs))
                        self.translator = translator
                        context.metrics.legacyMessages.labels("in").increment()
                        if commands.count == Batch.maxCommands {
                            submit(commands)
                            commands = []
                        }
                    } catch {
                        // The app logs and ignores what it cannot read; so do we.
                        context.metrics.errors(kind: "legacy_message").increment()
                        context.logger.debug("legacy message skipped", ["remote": remote, "error": error])
                    }
                case .data:
                    context.metrics.errors(kind: "legacy_command").increment()  // image upload etc.: not relayed
                }
            }
        } catch {
            submit(commands)
            context.metrics.errors(kind: "legacy_frame").increment()
            close(reason: "bad frame: \(error)")
            return
        }
        submit(commands)
    }

    private func submit(_ commands: [TimedCommand]) {
        guard !commands.isEmpty, !closed, let session, let author = translator?.author else { return }
        let batch = Batch(author: author, commands: commands)
        var state = BinaryCodecState()
        guard let payload = try? BinaryBatchCodec.encode(batch, state: &state, selfContained: true) else {
            context.metrics.errors(kind: "encode").increment()
            return
        }
        board.apply(batch)
        originSeq += 1
        context.driver.handle(.batch(originSeq: originSeq, payload: payload), from: session)
    }

    // MARK: outbound

    var linkStatus: LinkStatus { LinkStatus(address: connection.remoteAddress, tcp: connection.info) }

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !closed else { return }
        switch message {
        case .joinAccepted(let member, let role, _, _):
            translator = LegacyTranslator(author: member)
            context.logger.info("legacy device joined", ["room": room, "remote": remote, "author": member.rawValue, "role": role])
        case .joinRefused(let reason, let text):
            context.logger.warning("legacy device refused", ["room": room, "remote": remote, "reason": "\(reason)", "text": text])
        case .syncBegin(let begin):
            if begin.mode == .snapshot {
                board = Board()
                if begin.throughRoomSeq > 0, var translator {
                    send(translator.redraw(board))
                    self.translator = translator
                }
            }
        case .syncChunk(let syncID, let index, let items):
            for item in items {
                var fresh = BinaryCodecState()
                guard let batch = try? BinaryBatchCodec.decode(item.payload, state: &fresh) else {
                    context.metrics.errors(kind: "sync_decode").increment()
                    continue
                }
                show(Batch(author: item.author, commands: batch.commands))
            }
            if let session { context.driver.handle(.syncAck(syncID: syncID, chunk: index), from: session) }
        case .roomBatch(let roomBatch):
            guard let batch = try? BinaryBatchCodec.decode(roomBatch.payload, state: &liveCodec) else {
                context.metrics.errors(kind: "live_decode").increment()
                return
            }
            show(Batch(author: roomBatch.author, commands: batch.commands))
        case .error(let code, _, let text):
            if code == .historyFull || code == .storageUnavailable {
                // The app has no way to hear a refusal: close, so its user sees the link drop
                // rather than strokes that nobody else gets.
                context.logger.warning("legacy device closed: its batch was refused by the room log", ["room": room, "remote": remote, "code": "\(code)", "text": text])
                close(reason: "batch refused: \(text)")
                return
            }
            context.logger.debug("legacy batch refused", ["remote": remote, "code": "\(code)", "text": text])
        case .batchAck, .member, .syncDone, .goingAway, .unknown:
            break
        }
    }

    /// Another author's batch: fold it, translate it for the app.
    private func show(_ batch: Batch) {
        guard var translator else { return }
        board.apply(batch)
        var messages: [LegacyMessage] = []
        for timed in batch.commands {
            messages.append(contentsOf: translator.messages(for: timed.command, author: batch.author))
        }
        if translator.needsRedraw { messages.append(contentsOf: translator.redraw(board)) }
        self.translator = translator
        send(messages)
    }

    func relayClosed(_ reason: GoingAwayReason) {
        session = nil
        close(reason: "relay closed the session: \(reason)")
    }

    private func send(_ messages: [LegacyMessage]) {
        guard !messages.isEmpty else { return }
        var bytes: [UInt8] = []
        for message in messages { LegacyFrame.text(message).append(to: &bytes) }
        context.metrics.legacyMessages.labels("out").increment(by: UInt64(messages.count))
        write(bytes)
    }

    private func write(_ bytes: [UInt8]) {
        guard !closed else { return }
        do {
            let queued = try connection.write(bytes)
            context.metrics.bytesSent.labels("legacy").increment(by: UInt64(bytes.count))
            if !blocked && queued > LegacyPeer.backpressureHighBytes, let session {
                blocked = true
                context.driver.backpressure(session)
            }
        } catch {
            close(reason: error.code == UVError.noBufferSpace ? "device too slow (write queue full)" : "write failed: \(error)")
        }
    }

    // MARK: timing

    private func armTimer() {
        guard !closed, let timer else { return }
        let deadline = min(nextHeartbeatSend, lastHeartbeatHeard + context.timeoutMicroseconds)
        timer.start(atMicroseconds: deadline) { [weak self] in self?.timerFired() }
    }

    private func timerFired() {
        guard !closed else { return }
        let now = context.loop.now
        if now >= lastHeartbeatHeard + context.timeoutMicroseconds {
            context.metrics.errors(kind: "legacy_timeout").increment()
            close(reason: "no heartbeat for \(context.timeoutMicroseconds / 1000) ms")
            return
        }
        if now >= nextHeartbeatSend {
            write(LegacyFrame.heartbeat.bytes)
            nextHeartbeatSend = now + context.heartbeatMicroseconds
        }
        armTimer()
    }

    // MARK: close

    /// Drops the device. Idempotent.
    func close(reason: String) {
        guard !closed else { return }
        closed = true
        timer?.close()
        connection.close()
        if counted { context.metrics.sessions.labels("legacy").add(-1) }
        context.logger.info("legacy device left", ["room": room, "remote": remote, "reason": reason])
        if let session {
            self.session = nil
            context.driver.transportClosed(session)
        }
        onClosed(self)
    }
}
