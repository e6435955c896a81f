// The room's background on an app in server mode joined through `--legacy-connect`: its board
// connection cannot carry an image, so inkwired connects to the app's upload port (57777,
// `--legacy-connect-upload`) and sends the image as a client-mode app uploads one
// (`LegacyImagePush`). The app shows one image under its lines, fitted into its view.
import InkCodec
import InkImage
import InkLegacy
import InkProtocol
import InkUV

final class LegacyBackgroundPusher {
    /// What the app's current whiteboard screen shows under its lines, as far as we know.
    enum Shown: Equatable {
        /// A new screen: the white view.
        case nothing
        case image(BlobHash)
        /// A white image standing in for "no background" (the app has no way to remove one).
        case blank
    }

    let target: SocketAddress
    let room: String
    private let context: LegacyContext
    private var timer: LoopTimer?
    /// The background of the page the app shows (from its board connection's session).
    private var wanted: BackgroundImage?
    private var shown = Shown.nothing
    /// When the current board connection's screen is up (loop µs); nil without one.
    private var screenReadyAt: UInt64?
    private var attempt: Attempt?
    private var retryAt: UInt64?
    private var delayMs = LegacyBackgroundPusher.firstDelayMs
    private var failures = 0
    private var stopped = false

    static let firstDelayMs: UInt64 = 1000
    static let maxDelayMs: UInt64 = 30_000
    /// Chunks unacknowledged in the kernel at most: each leaves as its own segment, and this
    /// connection carries nothing else, so more than the board connection's six keep a Wi-Fi busy.
    static let maxOutstandingBytes = 32 * LegacySessionLimits.chunkBytes
    static let sendBufferBytes = 128 * 1024
    /// The white image shown for "no background" (a 4:3 white JPEG of a few hundred bytes).
    static let blank: (bytes: [UInt8], width: UInt32, height: UInt32) = {
        let w = 64, h = 48
        let bytes = ImageEncode.jpeg(rgb: [UInt8](repeating: 255, count: w * h * 3), width: w, height: h) ?? []
        return (bytes, UInt32(w), UInt32(h))
    }()

    private final class Attempt {
        let what: Shown
        var connection: TCPConnection?
        var push: LegacyImagePush?
        let bytes: [UInt8]
        let width: UInt32
        let height: UInt32
        init(what: Shown, bytes: [UInt8], width: UInt32, height: UInt32) {
            self.what = what
            self.bytes = bytes
            self.width = width
            self.height = height
        }
    }

    init(target: SocketAddress, room: String, context: LegacyContext) throws(UVError) {
        self.target = target
        self.room = room
        self.context = context
        timer = try LoopTimer(loop: context.loop)
    }

    private var now: UInt64 { context.loop.now }

    // MARK: inputs (from the connector)

    /// A board connection is up; its screen is a new one (white) from `readyAt` (loop µs).
    func boardConnected(screenReadyAt readyAt: UInt64) {
        cancelAttempt()
        shown = .nothing
        screenReadyAt = readyAt
        retryAt = nil
        delayMs = LegacyBackgroundPusher.firstDelayMs
        failures = 0
        evaluate()
    }

    /// The board connection went: so did its screen (the app closes the upload connection too).
    func boardClosed() {
        cancelAttempt()
        screenReadyAt = nil
        wanted = nil
        arm()
    }

    /// The page the app shows has this background now.
    func backgroundChanged(_ image: BackgroundImage?) {
        guard image != wanted else { return }
        wanted = image
        evaluate()
    }

    func stop() {
        stopped = true
        cancelAttempt()
        timer?.close()
        timer = nil
    }

    // MARK: deciding

    private var goal: Shown {
        if let wanted { return .image(wanted.hash) }
        return shown == .nothing ? .nothing : .blank
    }

    private func evaluate() {
        guard !stopped, attempt == nil, let ready = screenReadyAt else { return arm() }
        let t = now
        if t < ready || (retryAt.map { t < $0 } ?? false) { return arm() }
        retryAt = nil
        let goal = self.goal
        guard goal != shown, goal != .nothing else { return arm() }
        switch goal {
        case .image(let hash):
            guard let image = wanted, let bytes = context.driver.blobs.readBlob(room: room, hash: hash), !bytes.isEmpty else {
                context.logger.warning("legacy app background not shown: the room's image cannot be read", ["room": room, "image": hash.hex])
                return arm()
            }
            start(Attempt(what: goal, bytes: bytes, width: image.width, height: image.height))
        case .blank:
            let blank = LegacyBackgroundPusher.blank
            guard !blank.bytes.isEmpty else { return arm() }
            start(Attempt(what: goal, bytes: blank.bytes, width: blank.width, height: blank.height))
        case .nothing:
            break
        }
    }

    private func arm() {
        guard !stopped, let timer else { return }
        var next: UInt64?
        if let ready = screenReadyAt, attempt == nil {
            next = max(ready, retryAt ?? 0)
            if next! <= now && goal == shown { next = nil }
        }
        if let push = attempt?.push, let t = push.pollTimeout() { next = min(next ?? .max, t.microseconds) }
        guard let next else { timer.stop(); return }
        timer.start(atMicroseconds: max(next, now)) { [weak self] in self?.tick() }
    }

    private func tick() {
        guard !stopped else { return }
        if let attempt, let push = attempt.push {
            push.handleTimeout(now: Instant(microseconds: now))
            pump(attempt)
            return
        }
        evaluate()
    }

    // MARK: one push

    private func start(_ attempt: Attempt) {
        self.attempt = attempt
        do {
            attempt.connection = try TCPConnection.connect(loop: context.loop, to: target) { [weak self, weak attempt] result in
                guard let self, let attempt, self.attempt === attempt else {
                    if case .success(let c) = result { c.close() }
                    return
                }
                self.connected(attempt, result)
            }
        } catch {
            finish(attempt, .failed("cannot connect: \(error)"))
        }
    }

    private func connected(_ attempt: Attempt, _ result: Result<TCPConnection, UVError>) {
        switch result {
        case .failure(let error):
            attempt.connection = nil
            finish(attempt, .failed("cannot connect: \(error)"))
        case .success(let connection):
            attempt.connection = connection
            try? connection.setNoDelay(true)
            try? connection.setSendBuffer(bytes: LegacyBackgroundPusher.sendBufferBytes)
            let push = LegacyImagePush(image: attempt.bytes, width: attempt.width, height: attempt.height,
                                       now: Instant(microseconds: now), configuration: context.sessionConfiguration)
            attempt.push = push
            do {
                try connection.startReading({ [weak self, weak attempt] bytes in
                    guard let self, let attempt else { return }
                    attempt.push?.handleBytes(bytes, now: Instant(microseconds: self.now))
                    self.pump(attempt)
                }, onEnd: { [weak self, weak attempt] _ in
                    guard let self, let attempt else { return }
                    attempt.push?.handleClosed(now: Instant(microseconds: self.now))
                    self.pump(attempt)
                })
            } catch {
                finish(attempt, .failed("cannot read: \(error)"))
                return
            }
            connection.onError = { [weak self, weak attempt] error in
                guard let self, let attempt else { return }
                attempt.push?.handleClosed(now: Instant(microseconds: self.now))
                self.pump(attempt)
            }
            connection.onDrain = { [weak self, weak attempt] in
                guard let self, let attempt else { return }
                self.pump(attempt)
            }
            pump(attempt)
        }
    }

    private func pump(_ attempt: Attempt) {
        guard self.attempt === attempt, let push = attempt.push, let connection = attempt.connection else { return }
        while push.outcome == nil, connection.canSendRecord(LegacySessionLimits.chunkBytes, maxOutstanding: LegacyBackgroundPusher.maxOutstandingBytes),
              let chunk = push.pollTransmit(now: Instant(microseconds: now)) {
            do {
                let sent = try connection.sendRecord(chunk)
                if sent < chunk.count { context.metrics.errors(kind: "legacy_split_write").increment() }
                context.metrics.bytesSent.labels("legacy").increment(by: UInt64(chunk.count))
            } catch {
                push.handleClosed(now: Instant(microseconds: now))
            }
        }
        if let outcome = push.outcome { return finish(attempt, outcome) }
        // The kernel had no room for a whole chunk: acknowledgements make some; look again soon.
        if !push.isEverythingSent, let timer {
            let next = min(now + 2_000, push.pollTimeout()?.microseconds ?? .max)
            timer.start(atMicroseconds: next) { [weak self] in self?.tick() }
            return
        }
        arm()
    }

    private func finish(_ attempt: Attempt, _ outcome: LegacyImagePush.Outcome) {
        guard self.attempt === attempt else { return }
        self.attempt = nil
        attempt.connection?.close()
        attempt.connection = nil
        switch outcome {
        case .shown:
            shown = attempt.what
            failures = 0
            delayMs = LegacyBackgroundPusher.firstDelayMs
            let image: String
            if case .image(let hash) = attempt.what { image = hash.hex } else { image = "none (white)" }
            context.logger.info("background shown on the legacy app", ["room": room, "address": target, "image": image, "bytes": attempt.bytes.count])
        case .failed(let reason):
            failures += 1
            context.metrics.errors(kind: "legacy_background_push").increment()
            if failures == 1 {
                context.logger.notice("legacy app background not shown; retrying", ["room": room, "address": target, "reason": reason])
            } else {
                context.logger.debug("legacy app background still not shown", ["room": room, "address": target, "attempts": failures, "reason": reason])
            }
            retryAt = now + delayMs * 1000
            delayMs = min(delayMs * 2, LegacyBackgroundPusher.maxDelayMs)
        }
        evaluate()
    }

    private func cancelAttempt() {
        guard let attempt else { return }
        self.attempt = nil
        attempt.connection?.close()
        attempt.connection = nil
    }
}
