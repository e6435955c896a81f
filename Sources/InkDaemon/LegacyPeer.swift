import InkCodec
import InkLegacy
import InkProtocol
import InkRelay
import InkUV

/// One connected HYWhiteboard app: moves bytes between its TCP connection and its
/// `LegacySession` (which decides everything the app sees and the room gets), and between the
/// session and the relay. The app connected to us (`--legacy`) or we to it (`--legacy-connect`).
///
/// Writes are the session's 1030-byte chunks, each sent as one TCP segment (`sendRecord`), and
/// only while the kernel can send it at once: a chunk is built for the instant it is sent.
final class LegacyPeer: RelaySessionTransport {
    let connection: TCPConnection
    let room: String
    let number: UInt64
    private let context: LegacyContext
    private let onClosed: (LegacyPeer) -> Void
    private var session: LegacySession!
    private var relaySession: SessionID?
    private var timer: LoopTimer?
    private var originSeq: UInt64 = 0
    private var remote = "?"
    private var closed = false
    private var counted = false
    /// The kernel could not take a chunk: try again at this instant (backing off while it cannot).
    private var retryAt: UInt64?
    private var retryDelay: UInt64 = LegacyPeer.firstRetryMicroseconds
    private var reported = LegacySessionStats()
    /// Told the background of the page the app shows whenever it changes (a server-mode app's
    /// screen gets it through `LegacyBackgroundPusher`).
    var onShownBackground: ((BackgroundImage?) -> Void)?
    private var reportedBackground: BackgroundImage??

    /// Unacknowledged bytes kept in the kernel at most (six chunks): the send buffer always has
    /// room for a whole chunk, and what the app has not yet read stays small.
    static let maxOutstandingBytes = 6 * LegacySessionLimits.chunkBytes
    /// The socket's send buffer (the kernel doubles it): far above `maxOutstandingBytes`.
    static let sendBufferBytes = 64 * 1024
    static let firstRetryMicroseconds: UInt64 = 2_000
    static let maxRetryMicroseconds: UInt64 = 50_000

    init(connection: TCPConnection, room: String, number: UInt64, context: LegacyContext, onClosed: @escaping (LegacyPeer) -> Void) {
        self.connection = connection
        self.room = room
        self.number = number
        self.context = context
        self.onClosed = onClosed
    }

    private var origin: UInt64 { context.originBase | number }
    private var now: Instant { Instant(microseconds: context.loop.now) }

    func start() {
        remote = connection.remoteAddress?.description ?? "?"
        try? connection.setNoDelay(true)
        try? connection.setSendBuffer(bytes: LegacyPeer.sendBufferBytes)
        if let mss = connection.maximumSegmentBytes, mss < LegacySessionLimits.chunkBytes {
            context.logger.warning("legacy device's path carries segments smaller than the app's reads: its reader may break",
                                   ["remote": remote, "mss": mss])
        }
        session = LegacySession(configuration: context.sessionConfiguration, now: now)
        do {
            timer = try LoopTimer(loop: context.loop)
            try connection.startReading({ [weak self] bytes in self?.received(bytes) },
                                        onEnd: { [weak self] error in self?.close(reason: error.map { "read failed: \($0)" } ?? "device closed the connection") })
        } catch {
            close(reason: "setup failed: \(error)")
            return
        }
        connection.onError = { [weak self] error in self?.close(reason: "write failed: \(error)") }
        connection.onDrain = { [weak self] in self?.pump() }
        context.metrics.sessions.labels("legacy").add(1)
        counted = true
        let id = context.driver.open(self, kind: .legacy, from: connection.remoteAddress)
        relaySession = id
        guard !closed else { return }
        context.driver.authorizer.trust(origin)
        // User names carry no ':' (the relay's author label separator).
        let user = "legacy-\(number)@" + String(remote.map { $0 == ":" ? "_" : $0 })
        context.driver.handle(.join(JoinRequest(room: room, user: user, role: .presenter, origin: origin, have: .nothing)), from: id)
        context.driver.authorizer.forget(origin)
        pump()
    }

    // MARK: inputs

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        context.metrics.bytesReceived.labels("legacy").increment(by: UInt64(bytes.count))
        session.handleBytes(bytes, now: now)
        pump()
    }

    func deliver(legacy delivery: LegacyDelivery) {
        guard !closed else { return }
        switch delivery {
        case .joined(let author, let role, let board, _):
            session.handleJoined(author: author, board: board, now: now)
            context.logger.info("legacy device joined", ["room": room, "remote": remote, "author": author.rawValue, "role": role])
        case .batch(_, let author, let commands, let own):
            session.handleRoomBatch(author: author, commands: commands, own: own, now: now)
        }
        pump()
        reportBackground()
    }

    private func reportBackground() {
        guard !closed, let onShownBackground else { return }
        let background = session.shownBackground
        guard reportedBackground != .some(background) else { return }
        reportedBackground = .some(background)
        onShownBackground(background)
    }

    var linkStatus: LinkStatus { LinkStatus(address: connection.remoteAddress, tcp: connection.info) }

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !closed else { return }
        switch message {
        case .joinRefused(let reason, let text):
            // A flood of connections from one address leaves one line a minute.
            let host = connection.remoteAddress.map { $0.unmappedIPv4.withPort(0) }
            if let unlogged = context.joinRefusals.record(host, now: context.loop.now) {
                context.logger.warning("legacy device refused", ["room": room, "remote": remote, "reason": "\(reason)", "text": text,
                                                                "refused_unlogged": unlogged])
            }
            close(reason: "join refused: \(text)")
        case .error(let code, _, let text):
            // The app cannot hear a refusal, and keeps showing what the room did not take:
            // close, so its user sees the link drop rather than strokes nobody else has.
            context.logger.warning("legacy device closed: its batch was refused by the room log", ["room": room, "remote": remote, "code": "\(code)", "text": text])
            close(reason: "batch refused: \(text)")
        case .joinAccepted, .roomBatch, .batchAck, .member, .syncBegin, .syncChunk, .syncDone, .goingAway, .unknown, .blobChunk, .blobStored, .blobMissing:
            break
        }
    }

    func relayClosed(_ reason: GoingAwayReason) {
        relaySession = nil
        close(reason: "relay closed the session: \(reason)")
    }

    private func timerFired() {
        guard !closed else { return }
        retryAt = nil
        session.handleTimeout(now: now)
        pump()
    }

    // MARK: outputs

    /// Acts on what the session decided: its commands to the room, its chunks to the app.
    private func pump() {
        guard !closed else { return }
        while let event = session.pollEvent() {
            switch event {
            case .submit(let commands):
                guard let relaySession else { continue }
                originSeq += 1
                context.metrics.legacyMessages.labels("in").increment(by: UInt64(commands.count))
                context.driver.legacyCommands(commands, originSeq: originSeq, from: relaySession)
                if closed { return }
            case .close(let reason):
                if case .silent = reason { context.metrics.errors(kind: "legacy_timeout").increment() } else { context.metrics.errors(kind: "legacy_frame").increment() }
                close(reason: reason.description)
                return
            }
        }
        writeChunks()
        countStats()
        armTimer()
    }

    private func writeChunks() {
        while true {
            guard connection.canSendRecord(LegacySessionLimits.chunkBytes, maxOutstanding: LegacyPeer.maxOutstandingBytes) else {
                // Acknowledgements (or the app reading) will make room: look again shortly.
                retryAt = context.loop.now + retryDelay
                retryDelay = min(retryDelay * 2, LegacyPeer.maxRetryMicroseconds)
                return
            }
            retryDelay = LegacyPeer.firstRetryMicroseconds
            guard let chunk = session.pollTransmit(now: now) else { return }
            do {
                let sent = try connection.sendRecord(chunk)
                if sent < chunk.count { context.metrics.errors(kind: "legacy_split_write").increment() }
                context.metrics.bytesSent.labels("legacy").increment(by: UInt64(chunk.count))
            } catch {
                close(reason: "write failed: \(error)")
                return
            }
        }
    }

    private func countStats() {
        let s = session.stats
        context.metrics.legacyMessages.labels("out").increment(by: UInt64(s.messagesOut - reported.messagesOut))
        if s.skippedIn > reported.skippedIn { context.metrics.errors(kind: "legacy_message").increment(by: UInt64(s.skippedIn - reported.skippedIn)) }
        if s.repaints > reported.repaints { context.metrics.errors(kind: "legacy_repaint").increment(by: UInt64(s.repaints - reported.repaints)) }
        if s.drifts > reported.drifts { context.metrics.errors(kind: "legacy_drift").increment(by: UInt64(s.drifts - reported.drifts)) }
        reported = s
    }

    private func armTimer() {
        guard !closed, let timer else { return }
        var deadline = session.pollTimeout()?.microseconds
        if let retry = retryAt, deadline == nil || retry < deadline! { deadline = retry }
        guard let deadline else { timer.stop(); return }
        timer.start(atMicroseconds: deadline) { [weak self] in self?.timerFired() }
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
        if let relaySession {
            self.relaySession = nil
            context.driver.transportClosed(relaySession)
        }
        onClosed(self)
    }
}
