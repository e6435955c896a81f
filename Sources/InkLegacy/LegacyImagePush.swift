// Showing a background on an app in server mode: inkwired connects to the app's upload port
// (57777) and sends the image as a client-mode app uploads one (docs/protocol.md 3, Image
// upload). Sans-IO.
import InkCodec
import InkProtocol

/// One push of one image over one connection to the app's upload listener.
///
/// The app reads it with the same receive routine as its board connection (1030-byte reads,
/// the one-byte-tail defect), so every write is a `LegacyChunkWriter` chunk of exactly 1030
/// bytes, each to be sent as one TCP segment: the info `101,width,height,length`, the image in
/// file-chunk frames of `imageBytesPerFrame` (a frame and the chunk's leading heartbeat fill a
/// chunk exactly; the app appends whatever a file frame carries), then `102`. The app checks the
/// length, shows the image and closes the connection: that close is the only answer it gives.
///
/// ## Call order (the caller)
/// `init` when the TCP connection is up; `handleBytes` for every read (the app sends only
/// heartbeats here); `handleTimeout` at `pollTimeout`; `handleClosed` when the app closed.
/// After every input: send each `pollTransmit` chunk while the connection can send one whole,
/// re-arm the timer, and stop once `outcome` is set.
public final class LegacyImagePush {
    public enum Outcome: Sendable, Hashable, CustomStringConvertible {
        /// Everything was sent and the app closed the connection, as it does once it has taken an image.
        case shown
        case failed(String)

        public var description: String {
            switch self {
            case .shown: "shown"
            case .failed(let reason): reason
            }
        }
    }

    /// Image bytes in one file-chunk frame: header and leading heartbeat make 1030.
    public static let imageBytesPerFrame = LegacyChunkWriter.maxFrameBytes - LegacyFrame.headerBytes
    /// The whole push (a few MB at LAN speed take a second or two) must end within this.
    public static let pushTimeout = Instant.Duration.milliseconds(60_000)
    /// After `102` the app closes at once; a push not closed by then failed (the app refused
    /// the length, or never saw the end).
    public static let closeWait = Instant.Duration.milliseconds(10_000)

    public let configuration: LegacySessionConfiguration
    public private(set) var outcome: Outcome?
    /// Chunks written so far (for tests and metrics).
    public private(set) var chunksSent = 0

    private let image: [UInt8]
    private let info: [UInt8]
    private var nextImageOffset = 0
    private var infoQueued = false
    private var completionQueued = false
    private var writer = LegacyChunkWriter()
    private var decoder = LegacyFrameDecoder()
    private let deadline: Instant
    private var everythingSentAt: Instant?
    private var lastHeartbeatHeard: Instant
    private var lastChunkSent: Instant?

    /// `width` and `height` go in the info frame (the app keeps them and shows the image at its
    /// own size, fitted into its view).
    public init(image: [UInt8], width: UInt32, height: UInt32, now: Instant, configuration: LegacySessionConfiguration = .init()) {
        precondition(!image.isEmpty, "an image to push")
        self.image = image
        self.configuration = configuration
        info = Array("\(LegacyUploadReceiver.infoCode),\(width),\(height),\(image.count)".utf8)
        deadline = now + LegacyImagePush.pushTimeout
        lastHeartbeatHeard = now
    }

    /// Whether every chunk has been handed out.
    public var isEverythingSent: Bool { everythingSentAt != nil }

    // MARK: inputs

    /// A read from the app: its heartbeats (it sends one at once and every 3 s).
    public func handleBytes(_ bytes: some Collection<UInt8>, now: Instant) {
        guard outcome == nil else { return }
        do {
            try decoder.handleBytes(bytes)
            while let frame = try decoder.pollFrame() {
                if case .heartbeat = frame { lastHeartbeatHeard = now }
            }
        } catch {
            outcome = .failed("the app's upload connection sent a bad frame: \(error)")
        }
    }

    public func handleTimeout(now: Instant) {
        guard outcome == nil else { return }
        if now >= deadline {
            outcome = .failed("not shown within \(LegacyImagePush.pushTimeout.microseconds / 1_000_000) s")
        } else if let at = everythingSentAt, now >= at + LegacyImagePush.closeWait {
            outcome = .failed("the app did not close after the whole image (it refuses an image whose length it did not get)")
        } else if now >= lastHeartbeatHeard + configuration.silenceTimeout {
            outcome = .failed("no heartbeat from the app for \(configuration.silenceTimeout.microseconds / 1000) ms")
        }
    }

    /// The app closed the connection (or it failed).
    public func handleClosed(now: Instant) {
        guard outcome == nil else { return }
        outcome = isEverythingSent ? .shown : .failed("the app closed the connection after \(nextImageOffset) of \(image.count) image bytes")
    }

    // MARK: outputs

    /// The next chunk (exactly 1030 bytes) to send now, or nil.
    public func pollTransmit(now: Instant) -> [UInt8]? {
        guard outcome == nil else { return nil }
        if everythingSentAt == nil {
            while true {
                guard let frame = nextFrame() else {
                    everythingSentAt = now
                    return sent(writer.finish(), now)
                }
                var bytes: [UInt8] = []
                frame.append(to: &bytes)
                if let full = writer.append(frame: bytes) { return sent(full, now) }
            }
        }
        // Waiting for the app to close: keep its liveness timer fed.
        if let last = lastChunkSent, now >= last + configuration.heartbeatInterval { return sent(writer.finish(), now) }
        return nil
    }

    public func pollTimeout() -> Instant? {
        guard outcome == nil else { return nil }
        var next = min(deadline, lastHeartbeatHeard + configuration.silenceTimeout)
        if let at = everythingSentAt {
            next = min(next, at + LegacyImagePush.closeWait)
            if let last = lastChunkSent { next = min(next, last + configuration.heartbeatInterval) }
        }
        return next
    }

    private func sent(_ chunk: [UInt8], _ now: Instant) -> [UInt8] {
        chunksSent += 1
        lastChunkSent = now
        return chunk
    }

    private func nextFrame() -> LegacyFrame? {
        if !infoQueued {
            infoQueued = true
            return .data(command: LegacyFrame.textCommand, payload: info)
        }
        if nextImageOffset < image.count {
            var end = min(image.count, nextImageOffset + LegacyImagePush.imageBytesPerFrame)
            // A frame that starts a chunk must leave a gap the writer can pad (never 1, 3 or 5
            // bytes): such a last piece goes as two frames, its last 6 bytes in a chunk of their own.
            let bytes = LegacyFrame.headerBytes + end - nextImageOffset
            let gap = LegacyImagePush.imageBytesPerFrame - (end - nextImageOffset)
            if (writer.isEmpty || !writer.fits(bytes)) && (gap == 1 || gap == 3 || gap == 5) { end -= LegacyFrame.headerBytes }
            defer { nextImageOffset = end }
            return .data(command: LegacyFrame.fileChunkCommand, payload: Array(image[nextImageOffset..<end]))
        }
        if !completionQueued {
            completionQueued = true
            return .data(command: LegacyFrame.textCommand, payload: Array("\(LegacyUploadReceiver.completionCode)".utf8))
        }
        return nil
    }
}
