import InkCodec
import InkUV

/// One connected HYWhiteboard app (docs/legacy-hywhiteboard.md).
///
/// - Framing: `LegacyFrameDecoder` over every read; a broken stream closes this peer only.
/// - Heartbeats: `27 11` every `heartbeatMicroseconds`; a peer that sends no heartbeat for
///   `timeoutMicroseconds` is dropped (data frames do not count, as in the app).
/// - Inbound: the text messages of one read become one batch of this peer's author.
/// - Outbound: other authors' batches go through its `LegacyTranslator`; when the translator
///   cannot express a change it repaints the app from the board. On connect the app receives
///   the current board the same way.
final class LegacyPeer: RoomMember {
    let connection: TCPConnection
    let room: String
    let number: UInt64
    private let context: LegacyContext
    private let onClosed: (LegacyPeer) -> Void
    private var decoder = LegacyFrameDecoder()
    private var translator: LegacyTranslator?
    private var timer: LoopTimer?
    private var lastHeartbeatHeard: UInt64 = 0
    private var nextHeartbeatSend: UInt64 = 0
    private var originSeq: UInt64 = 0
    private var remote = "?"
    private var user = ""
    private var closed = false

    init(connection: TCPConnection, room: String, number: UInt64, context: LegacyContext, onClosed: @escaping (LegacyPeer) -> Void) {
        self.connection = connection
        self.room = room
        self.number = number
        self.context = context
        self.onClosed = onClosed
    }

    private var author: AuthorID? { translator?.author }

    func start() {
        remote = connection.remoteAddress?.description ?? "?"
        user = "legacy-\(number)@\(remote)"
        try? connection.setNoDelay(true)
        let board: Board
        do {
            let (author, current) = try context.hub.join(room, member: self)
            translator = LegacyTranslator(author: author)
            board = current
        } catch {
            context.metrics.refusedJoins.labels(error == .tooManyRooms(limit: context.hub.limits.maxRooms) ? "too_many_rooms" : "room_full").increment()
            context.logger.warning("legacy device refused", ["room": room, "remote": remote, "reason": error])
            connection.close()
            onClosed(self)
            return
        }
        context.metrics.sessions.labels("legacy").add(1)
        context.logger.info("legacy device joined", ["room": room, "remote": remote, "author": author!.rawValue])
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
        if !board.visibleStrokes(on: .first).isEmpty, var translator {
            let messages = translator.redraw(board)
            self.translator = translator
            send(messages)
        }
        armTimer()
    }

    // MARK: inbound

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, var translator else { return }
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
                    do {
                        let message = try LegacyMessage(parsing: payload[...])
                        commands.append(translator.timedCommand(from: message, timeMs: nowMs))
                        context.metrics.legacyMessages.labels("in").increment()
                        if commands.count == Batch.maxCommands {
                            submit(commands, nowMs: nowMs, author: translator.author)
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
            self.translator = translator
            submit(commands, nowMs: nowMs, author: translator.author)
            context.metrics.errors(kind: "legacy_frame").increment()
            close(reason: "bad frame: \(error)")
            return
        }
        self.translator = translator
        submit(commands, nowMs: nowMs, author: translator.author)
    }

    private func submit(_ commands: [TimedCommand], nowMs: UInt64, author: AuthorID) {
        guard !commands.isEmpty else { return }
        originSeq += 1
        context.hub.submit(Batch(author: author, commands: commands), room: room, user: user,
                           origin: context.originBase | number, originSeq: originSeq, nowMs: nowMs)
    }

    // MARK: outbound

    func deliver(_ batch: Batch, board: Board) {
        guard !closed, var translator else { return }
        var messages: [LegacyMessage] = []
        for timed in batch.commands {
            messages.append(contentsOf: translator.messages(for: timed.command, author: batch.author))
        }
        if translator.needsRedraw { messages.append(contentsOf: translator.redraw(board)) }
        self.translator = translator
        send(messages)
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
            try connection.write(bytes)
            context.metrics.bytesSent.labels("legacy").increment(by: UInt64(bytes.count))
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
        if let author { context.hub.leave(room, author: author) }
        if translator != nil { context.metrics.sessions.labels("legacy").add(-1) }
        timer?.close()
        connection.close()
        context.logger.info("legacy device left", ["room": room, "remote": remote, "reason": reason])
        onClosed(self)
    }
}
