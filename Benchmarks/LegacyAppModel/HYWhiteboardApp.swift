// One HYWhiteboard v1.2 app, written here from its source: socket service (heartbeats and the
// liveness check), conversation manager (parsing, the 60 ms send buffer) and whiteboard screen.
// Test fixture, driven in virtual time or over a real socket. No IO of its own.
import InkCodec
import InkProtocol

/// A whole app: `HYSocketService` + `HYConversationManager` + `HYWhiteboardViewController`.
///
/// Drive it like the transport would: `handleConnected` when the TCP connection is up, then
/// each read (at most `HYReceiver.readBytes`) with `handleRead`, `handleTimeout` at
/// `pollTimeout`, and send every write `pollWrite` returns. The user acts with `touch`,
/// `pickPen`, `pressUndo`, `pressRedo`, `pressClear` (once the screen is up: `isScreenUp`).
public final class HYWhiteboardApp {
    public enum Mode: Sendable {
        /// The user typed `IP PORT`: the app connected to a relay.
        case client
        /// The app listened; a relay connected to it (`HYServerManager`, one client).
        case server
    }

    public struct Configuration: Sendable {
        public var mode = Mode.client
        /// From the connection to the whiteboard screen's `viewDidLoad` (pushing the view
        /// controller); data parsed before is dropped.
        public var screenLoadDelay = Instant.Duration.milliseconds(100)
        /// `kTimeSendHeartbeat`.
        public var heartbeatInterval = Instant.Duration.milliseconds(3000)
        /// `kTimeCheckHeartbeat`: the check timer's period and the allowed silence. 7 s in the
        /// v1.2 source read for this model; 9 s in the project's notes; tests use both.
        public var livenessInterval = Instant.Duration.milliseconds(9000)
        /// `kTimeIntervalSendCmd`.
        public var flushInterval = Instant.Duration.milliseconds(60)

        public init() {}
    }

    public enum State: Hashable, Sendable {
        case notConnected
        case connected
        /// The app dropped the link (its liveness check) or the peer closed it; the screen is gone.
        case disconnected(String)
        case crashed(HYCrash)
    }

    public let configuration: Configuration
    public private(set) var state = State.notConnected
    private var receiver = HYReceiver()
    /// A clean decoder of the same reads: what the app should have parsed (the desync oracle).
    private var oracle = LegacyFrameDecoder()
    private var expected: [HYDelivery] = []
    private var expectedStart = 0
    public private(set) var desync: String?
    private var vc = HYWhiteboardScreen()
    private var cmdBuff: [LegacyMessage] = []
    private var writes: [[UInt8]] = []
    private var connectedAt = Instant.zero
    /// `_heartbeatStamp`, in seconds.
    private var heartbeatStamp = 0.0
    private var nextHeartbeat: Instant?
    private var nextCheck: Instant?
    private var nextFlush: Instant?
    private var screenAt: Instant?
    public private(set) var isScreenUp = false

    // Counters for tests and the benchmark.
    public private(set) var touchesAccepted = 0
    public private(set) var touchesIgnored = 0
    public private(set) var framesParsed = 0
    public private(set) var framesDropped = 0
    public private(set) var bytesRead = 0
    public private(set) var bytesWritten = 0
    /// When the last data frame was applied to the screen.
    public private(set) var lastAppliedAt: Instant?
    /// With `recordsLineEnds`: when each line got its end point, keyed by its first point (for
    /// latency measurements).
    public var recordsLineEnds = false
    public private(set) var lineEnds: [(at: Instant, first: LegacyAppScreen.Point, received: Bool)] = []
    /// With `recordsLineEnds`: when each clear was received.
    public private(set) var clearsReceived: [Instant] = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// An app not connected to anything (`进入白板(不使用网络)`): its screen is up at once.
    public static func offline() -> HYWhiteboardApp {
        let app = HYWhiteboardApp()
        app.isScreenUp = true
        return app
    }

    public var screen: LegacyAppScreen { vc.screen }
    /// `_imageView.image`: what the screen shows under its lines (nil: the white view). Only
    /// `onNewImage:` sets it, from the upload manager (`HYUploadServer.swift`), in server mode.
    public private(set) var background: HYImage?
    /// `onNewImage:` calls.
    public private(set) var imagesShown = 0

    /// `onNewImage:` (the scroll view's zoom is reset; the image view takes the image).
    func showImage(_ image: HYImage?) {
        background = image
        imagesShown += 1
    }

    /// Whether this screen is the upload manager's delegate: from `viewDidLoad` (the screen is
    /// up) to `viewWillDisappear` (its board connection went, the screen is popped).
    public var takesImages: Bool { isScreenUp && state == .connected }
    /// Whether local touches are ignored now (a received line is open).
    public var isLocked: Bool { !vc.drawable }
    public var isRunning: Bool { state == .connected || state == .notConnected }

    // MARK: transport

    /// The connection is up (`onSocketDidConnectServer`, or the server accepting): the heartbeat
    /// thread sends one at once and every `heartbeatInterval`; the check timer starts.
    public func handleConnected(now: Instant) {
        guard state == .notConnected else { return }
        state = .connected
        connectedAt = now
        heartbeatStamp = seconds(now)
        queueWrite(LegacyFrame.heartbeat.bytes)
        nextHeartbeat = now + configuration.heartbeatInterval
        nextCheck = now + configuration.livenessInterval
        screenAt = now + configuration.screenLoadDelay
        // Server mode: `addNewClient` starts the send timer at the accept; client mode: the
        // connect callback does, with the screen push.
        nextFlush = configuration.mode == .server ? now + configuration.flushInterval : nil
    }

    /// The peer closed the connection (the app's `NSStreamEventEndEncountered`): the screen goes.
    public func handlePeerClosed(now: Instant) {
        guard state == .connected else { return }
        state = .disconnected("peer closed the connection")
    }

    /// One read of at most `HYReceiver.readBytes` bytes.
    public func handleRead(_ bytes: [UInt8], now: Instant) {
        guard state == .connected else { return }
        precondition(bytes.count <= HYReceiver.readBytes, "the app reads at most \(HYReceiver.readBytes) bytes")
        bytesRead += bytes.count
        checkAgainstOracle(bytes)
        let deliveries = receiver.handleRead(bytes)
        defer { checkNotBehind() }
        for delivery in deliveries {
            if desync == nil { compare(delivery) }
            switch delivery {
            case .heartbeat:
                heartbeatStamp = seconds(now)
            case .data(_, let payload):
                framesParsed += 1
                guard isScreenUp else { framesDropped += 1; continue }  // no converDelegate yet
                do {
                    try conversation(payload, now: now)
                } catch {
                    state = .crashed(error)
                    return
                }
            }
        }
    }

    /// The next write the app makes, or nil.
    public func pollWrite() -> [UInt8]? {
        guard !writes.isEmpty else { return nil }
        let w = writes.removeFirst()
        bytesWritten += w.count
        return w
    }

    public func pollTimeout() -> Instant? {
        guard state == .connected else { return nil }
        var next = nextHeartbeat
        for t in [nextCheck, nextFlush, isScreenUp ? nil : screenAt] { if let t, next == nil || t < next! { next = t } }
        return next
    }

    public func handleTimeout(now: Instant) {
        guard state == .connected else { return }
        if let at = screenAt, !isScreenUp, now >= at {
            isScreenUp = true
            if configuration.mode == .client { nextFlush = now + configuration.flushInterval }
        }
        if let at = nextHeartbeat, now >= at {
            queueWrite(LegacyFrame.heartbeat.bytes)
            nextHeartbeat = at + configuration.heartbeatInterval
        }
        if let at = nextFlush, now >= at {
            // `_sendWhiteboardCommand`: every buffered command, one frame each.
            for message in cmdBuff { queueWrite(LegacyFrame.text(message).bytes) }
            cmdBuff.removeAll()
            nextFlush = at + configuration.flushInterval
        }
        if let at = nextCheck, now >= at {
            // `_checkHeartbeatMessage`.
            let limit = Double(configuration.livenessInterval.microseconds) / 1_000_000
            if seconds(now) - heartbeatStamp > limit {
                state = .disconnected("no heartbeat recognised for more than \(Int(limit)) s")
                return
            }
            nextCheck = at + configuration.livenessInterval
        }
    }

    // MARK: user

    /// One sample of the pan gesture at `x`, `y` (millionths of the view). False when the app
    /// ignored it (a received line is open).
    @discardableResult
    public func touch(_ phase: StrokePhase, x: Int32, y: Int32, now: Instant) -> Bool {
        guard isScreenUp, isRunning else { return false }
        do {
            guard let point = try vc.touch(mx: x, my: y, type: Int(phase.rawValue)) else {
                touchesIgnored += 1
                return false
            }
            touchesAccepted += 1
            if recordsLineEnds && point.type == HYWhiteboardScreen.end { noteEnd(.mine, now: now) }
            let tool: Tool = point.isEraser ? .eraser : .pen
            let sentPhase = StrokePhase(rawValue: UInt8(point.type)) ?? phase
            cmdBuff.append(.point(tool: tool, x: x, y: y, phase: sentPhase))
            return true
        } catch {
            state = .crashed(error)
            return false
        }
    }

    /// The colour, eraser and width buttons that make `style` the pen (one message, as one tap).
    public func pickPen(_ style: PenStyle, now: Instant) {
        guard isScreenUp, isRunning else { return }
        vc.pickPen(color: Int(style.color), width: Int(style.width))
        cmdBuff.append(.penStyle(style))
    }

    public func pressUndo(now: Instant) {
        guard isScreenUp, isRunning, vc.cancel(.mine) else { return }
        sendAtOnce(.undo)
    }

    public func pressRedo(now: Instant) {
        guard isScreenUp, isRunning else { return }
        do {
            if try vc.resume(.mine) { sendAtOnce(.redo) }
        } catch {
            state = .crashed(error)
        }
    }

    public func pressClear(now: Instant) {
        guard isScreenUp, isRunning, vc.clearAll() else { return }
        sendAtOnce(.clear)
    }

    /// The app's pen (its own pick or the last pen it received).
    public var pen: PenStyle? { PenStyle(color: UInt8(clamping: vc.lineColorIndex), width: UInt8(clamping: vc.lineWidth)) }

    // MARK: internals

    /// `sendEditAction:`: not buffered.
    private func sendAtOnce(_ message: LegacyMessage) {
        if isConnectedForWrites { queueWrite(LegacyFrame.text(message).bytes) }
    }

    private var isConnectedForWrites: Bool { state == .connected }

    private func queueWrite(_ bytes: [UInt8]) {
        guard state == .connected else { return }
        writes.append(bytes)
    }

    /// `onSocketServiceDidReceiveData:command:service:` and the screen's handlers.
    private func conversation(_ payload: [UInt8], now: Instant) throws(HYCrash) {
        guard let fields = HYText.fields(payload), let first = fields.first else { return }
        lastAppliedAt = now
        switch HYText.integerValue(first) {
        case 1, 2:
            guard fields.count >= 4 else { throw HYCrash(reason: "point with \(fields.count) fields") }
            let x = Double(HYText.floatValue(fields[1]))
            let y = Double(HYText.floatValue(fields[2]))
            let type = Int(HYText.intValue(fields[3]))
            try vc.receivePoint(x: x, y: y, mx: millionths(fields[1], x), my: millionths(fields[2], y), type: type,
                                eraser: HYText.integerValue(first) == 2)
            if recordsLineEnds && type == HYWhiteboardScreen.end { noteEnd(.other, now: now) }
        case 3:
            guard fields.count >= 3 else { throw HYCrash(reason: "pen style with \(fields.count) fields") }
            vc.receivePen(color: HYText.integerValue(fields[1]), width: HYText.integerValue(fields[2]))
        case 4: _ = vc.cancel(.other)
        case 5: _ = try vc.resume(.other)
        case 6:
            _ = vc.clearAll()
            if recordsLineEnds { clearsReceived.append(now) }
        default: break  // logged and ignored
        }
    }

    /// The millionths of a coordinate field, for comparing screens (the app keeps the float).
    private func millionths(_ field: [UInt8], _ value: Double) -> Int32 {
        // `%f` text (what relays send): `-?digits.dddddd`, read exactly.
        var i = 0
        let negative = field.first == UInt8(ascii: "-")
        if negative { i = 1 }
        var whole: Int64 = 0
        var fraction: Int64 = 0
        var decimals = -1
        while i < field.count {
            let c = field[i]
            if c == UInt8(ascii: ".") && decimals < 0 { decimals = 0 } else if c >= 48 && c <= 57 {
                if decimals < 0 { whole = whole &* 10 &+ Int64(c - 48) } else { fraction = fraction * 10 + Int64(c - 48); decimals += 1 }
            } else { break }
            i += 1
        }
        if i == field.count && decimals == 6 && whole < 2148 {
            let m = whole * 1_000_000 + fraction
            return Int32(clamping: negative ? -m : m)
        }
        if case .success(let exact) = LegacyNumber.parseCoordinate(field[...]) { return exact }
        return Int32(clamping: Int64((value * 1_000_000).rounded()))
    }

    private func noteEnd(_ user: HYUser, now: Instant) {
        guard let index = vc.lastLineIndex[user], index >= 0, index < vc.allLines.count, let p = vc.allLines[index].points.first else { return }
        lineEnds.append((now, LegacyAppScreen.Point(x: p.mx, y: p.my), user == .other))
    }

    private func seconds(_ t: Instant) -> Double { Double(t.microseconds) / 1_000_000 }

    // MARK: the oracle

    private func checkAgainstOracle(_ bytes: [UInt8]) {
        guard desync == nil else { return }
        do {
            try oracle.handleBytes(bytes)
            while let frame = try oracle.pollFrame() {
                switch frame {
                case .heartbeat: expected.append(.heartbeat)
                case .data(let c, let p): expected.append(.data(command: c, payload: p))
                }
            }
        } catch {
            desync = "the stream itself is malformed: \(error)"
        }
    }

    /// After a read the app must have parsed all the oracle did, but a zero-length frame it
    /// only parses once more bytes arrive.
    private func checkNotBehind() {
        guard desync == nil, expected.count - expectedStart > 1 else { return }
        desync = "after \(expectedStart) frames the app parses nothing more (its reader is off the stream)"
    }

    private func compare(_ delivery: HYDelivery) {
        guard expectedStart < expected.count, expected[expectedStart] == delivery else {
            desync = "after \(expectedStart) frames the app parsed \(delivery) (its reader is off the stream)"
            return
        }
        expectedStart += 1
        if expectedStart > 4096 {
            expected.removeFirst(expectedStart)
            expectedStart = 0
        }
    }
}
