import InkCodec
import InkLegacy
import InkProtocol
import LegacyAppModel
import Testing

/// `LegacyImagePush` against the server-mode app's upload side (`HYUploadManager` and an upload
/// connection with the app's reader), in virtual time: exactly the image, in 1030-byte writes
/// the app's reader takes whole; and the app's own defects on that port.
@Suite struct ImagePushTests {
    /// Stands for ImageIO: bytes starting with 0xFF are an 8 x 6 image, others do not decode.
    static let decode: HYUploadManager.Decoder = { $0.first == 0xFF ? (width: 8, height: 6) : nil }

    static func image(_ count: Int, seed: UInt64) -> [UInt8] {
        var r = SimRandomLike(seed)
        return [0xFF] + (1..<count).map { _ in UInt8(truncatingIfNeeded: r.next()) }
    }

    /// A connected app whose screen is up (the upload manager's delegate).
    static func screen() -> HYWhiteboardApp {
        let app = HYWhiteboardApp(configuration: .init())
        app.handleConnected(now: .zero)
        app.handleTimeout(now: .milliseconds(200))
        return app
    }

    /// Runs a push into an app's upload connection, one read per write (each write is one
    /// segment of exactly the app's read size), the app's heartbeats back; returns the outcome.
    static func run(_ push: LegacyImagePush, into connection: HYUploadConnection, start: Instant = .zero) -> LegacyImagePush.Outcome? {
        var now = start
        for _ in 0..<100_000 {
            while let w = connection.pollWrite() { push.handleBytes(w, now: now) }
            var sent = false
            while let chunk = push.pollTransmit(now: now) {
                #expect(chunk.count == LegacySessionLimits.chunkBytes)
                connection.handleRead(chunk, now: now)
                sent = true
                if !connection.isOpen { push.handleClosed(now: now); return push.outcome }
            }
            if let outcome = push.outcome { return outcome }
            if !sent {
                let next = [push.pollTimeout(), connection.pollTimeout()].compactMap { $0 }.min() ?? now
                now = max(now + .milliseconds(1), next)
                push.handleTimeout(now: now)
                connection.handleTimeout(now: now)
                if !connection.isOpen { push.handleClosed(now: now) }
            }
        }
        return push.outcome
    }

    @Test(arguments: [1, 990, 1017, 1019, 1021, 1022, 1023, 2039, 2041, 2043, 2044, 250_000])
    func aPushShowsExactlyTheImage(size: Int) {
        let image = Self.image(size, seed: UInt64(size))
        let manager = HYUploadManager(decode: Self.decode)
        let app = Self.screen()
        manager.screen = app
        let connection = HYUploadConnection(manager: manager, configuration: .init(), now: .zero)
        let push = LegacyImagePush(image: image, width: 8, height: 6, now: .zero)
        #expect(Self.run(push, into: connection) == .shown)
        #expect(app.background == HYImage(bytes: image, width: 8, height: 6))
        #expect(connection.closedReason == "image taken" && connection.crash == nil)
        #expect(manager.lengthMismatches == 0)
        // Info + ceil(size / 1022) file frames + 102, packed whole into 1030-byte writes.
        #expect(push.chunksSent <= 3 + (size + LegacyImagePush.imageBytesPerFrame - 1) / LegacyImagePush.imageBytesPerFrame)
    }

    /// The client-mode app's own form (`LegacyUploadSender`: a short info, then 1030-byte
    /// frames), read 1030 bytes at a time, puts every read boundary the info's length into a
    /// frame, never one byte past one: the app's reader parses it. (Other read sizes can break
    /// it; the daemon's pushes are whole 1030-byte writes and do not depend on that.)
    @Test func theAppsOwnUploadFormReachesAServerModeApp() {
        let image = Self.image(5000, seed: 7)
        let manager = HYUploadManager(decode: Self.decode)
        let app = Self.screen()
        manager.screen = app
        let connection = HYUploadConnection(manager: manager, configuration: .init(), now: .zero)
        var stream: [UInt8] = []
        for f in LegacyUploadSender.frames(for: image) { f.append(to: &stream) }
        var i = 0
        while i < stream.count, connection.isOpen {
            let n = min(HYReceiver.readBytes, stream.count - i)
            connection.handleRead(Array(stream[i..<i + n]), now: .milliseconds(1))
            i += n
        }
        #expect(app.background?.bytes == image)
    }

    @Test func theAppsDefectsOnItsUploadPort() throws {
        let manager = HYUploadManager(decode: Self.decode)
        let app = Self.screen()
        manager.screen = app
        func frames(_ list: [LegacyFrame]) -> [UInt8] {
            var out: [UInt8] = []
            for f in list { f.append(to: &out) }
            return out
        }
        func text(_ s: String) -> LegacyFrame { .data(command: LegacyFrame.textCommand, payload: Array(s.utf8)) }
        func file(_ b: [UInt8]) -> LegacyFrame { .data(command: LegacyFrame.fileChunkCommand, payload: b) }

        // `102` with fewer bytes than announced: logged, the connection stays open, nothing shown.
        let c1 = HYUploadConnection(manager: manager, configuration: .init(), now: .zero)
        c1.handleRead(frames([text("101,4096,4096,4"), file([0xFF, 1]), text("102")]), now: .zero)
        #expect(c1.isOpen && manager.lengthMismatches == 1 && app.background == nil)
        // The buffer is kept: two more bytes and a second `102` complete the image.
        c1.handleRead(frames([file([2, 3]), text("102")]), now: .zero)
        #expect(!c1.isOpen && app.background?.bytes == [0xFF, 1, 2, 3])

        // File data before any `101` is appended to what the last image left.
        let c2 = HYUploadConnection(manager: manager, configuration: .init(), now: .zero)
        c2.handleRead(frames([file([9])]), now: .zero)
        #expect(manager.receivedData == [0xFF, 1, 2, 3, 9])

        // An image that does not decode: the screen gets a nil image (its background goes).
        c2.handleRead(frames([text("101,1,1,3"), file([1, 2, 3]), text("102")]), now: .zero)
        #expect(!c2.isOpen && app.background == nil && app.imagesShown == 2)

        // `101` with fewer than three fields: `dataArr[2]` raises; the app crashes.
        let c3 = HYUploadConnection(manager: manager, configuration: .init(), now: .zero)
        c3.handleRead(frames([text("101,5")]), now: .zero)
        #expect(c3.crash != nil && !c3.isOpen)

        // Without a whiteboard screen (before the first board connection, or after it went) a
        // whole image is taken and closed, and shows nowhere.
        manager.screen = nil
        let c4 = HYUploadConnection(manager: manager, configuration: .init(), now: .zero)
        c4.handleRead(frames([text("101,4096,4096,1"), file([0xFF]), text("102")]), now: .zero)
        #expect(!c4.isOpen && manager.imagesDropped == 1)
    }

    /// An app that stops answering (no heartbeat for 9 s) fails the push; one that never closes
    /// after the whole image (it refused the length) fails it after the close wait.
    @Test func aSilentOrStuckAppFailsThePush() {
        let push = LegacyImagePush(image: Self.image(3000, seed: 1), width: 8, height: 6, now: .zero)
        while push.pollTransmit(now: .zero) != nil {}
        #expect(push.isEverythingSent)
        push.handleBytes(LegacyFrame.heartbeat.bytes, now: .milliseconds(8000))
        push.handleTimeout(now: .milliseconds(9500))
        #expect(push.outcome == nil, "heard at 8 s")
        #expect(push.pollTransmit(now: .milliseconds(9500))?.count == LegacySessionLimits.chunkBytes, "a heartbeat chunk while waiting")
        push.handleTimeout(now: .milliseconds(10_000))
        if case .failed(let reason) = push.outcome { #expect(reason.contains("did not close")) } else { Issue.record("\(String(describing: push.outcome))") }

        let silent = LegacyImagePush(image: Self.image(3000, seed: 2), width: 8, height: 6, now: .zero)
        silent.handleTimeout(now: .milliseconds(9000))
        if case .failed(let reason) = silent.outcome { #expect(reason.contains("no heartbeat")) } else { Issue.record("\(String(describing: silent.outcome))") }
        let early = LegacyImagePush(image: Self.image(3000, seed: 3), width: 8, height: 6, now: .zero)
        _ = early.pollTransmit(now: .zero)
        early.handleClosed(now: .zero)
        #expect(early.outcome != .shown)
    }
}

/// A small deterministic generator for test bytes.
struct SimRandomLike {
    var state: UInt64
    init(_ seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
