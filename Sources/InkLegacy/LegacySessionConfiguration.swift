// Timing and bounds of one legacy session: the app's own constants and the relay's choices.
import InkCodec
import InkProtocol

/// How a `LegacySession` paces an app. The app's own constants come from HYWhiteboard v1.2
/// (docs/legacy-app.md); the rest are this relay's choices, each with the
/// reason it has that value.
public struct LegacySessionConfiguration: Sendable, Equatable {
    /// A heartbeat is written at least this often. The app checks its last heard heartbeat on a
    /// 7-9 s timer, so two missed writes still keep it connected.
    public var heartbeatInterval: Instant.Duration = .milliseconds(3000)
    /// An app that sends no heartbeat for this long is dropped (it sends one every 3 s; data
    /// frames do not count, as in the app).
    public var silenceTimeout: Instant.Duration = .milliseconds(9000)
    /// Nothing but heartbeats for this long after the connection opens: the app drops every data
    /// frame parsed before its whiteboard screen is up (the view controller becomes the
    /// socket's delegate when the screen loads, right after the connection succeeds).
    public var screenWait: Instant.Duration = .milliseconds(1000)
    /// The app's send timer (`kTimeIntervalSendCmd`, 60 ms): points and pen styles it buffered
    /// reach us at most this late.
    public var appFlushInterval: Instant.Duration = .milliseconds(60)
    /// How long past `appFlushInterval` an undo, redo or clear waits for the points it may have
    /// overtaken (they were still in the app's buffer when it sent the edit at once).
    public var editSlack: Instant.Duration = .milliseconds(60)
    /// After the app's user stops drawing, foreign strokes, clears and pen changes go to the app
    /// only at the moment its stroke's end arrives, or once it has been quiet this long: a
    /// stroke it starts while our bytes are in flight would otherwise get them in its middle
    /// (the app's point filter keeps one last point for every user, so its own line would change).
    public var quietAfterInput: Instant.Duration = .milliseconds(1000)
    /// A foreign stroke whose author sent no point for this long is shown as it is (its author
    /// left or lost its connection mid-stroke); the app only gets complete strokes.
    public var staleStroke: Instant.Duration = .milliseconds(3000)
    /// Milliseconds of the wall clock at `Instant.zero`, for the times of the app's commands.
    public var wallClockAtZeroMs: UInt64 = 0

    public init() {}
}

/// The bounds a session keeps, in the units they count.
public enum LegacySessionLimits {
    /// Bytes of one write: the app reads at most this many (`BUFFER_SIZE`, 1024 + 4 + 2), so
    /// writes of exactly this size, each sent as one TCP segment, are read one whole write at a
    /// time and no frame is ever split between two reads (the app mis-parses some splits).
    public static let chunkBytes = 1030
    /// Commands of the app in one submitted batch (the codec's bound).
    public static let maxCommandsPerBatch = 4096
    /// Edits (undo, redo, clear) of the app waiting for the points they overtook.
    public static let maxPendingEdits = 64
    /// Frames of one operation waiting to be packed into chunks: a stroke's pen, its points (the
    /// board keeps at most `Board.maxPointsPerStroke`) and the end a one-point stroke gets.
    /// Unparsed bytes from the app are bounded by `LegacyFrameDecoder.maxBufferedBytes`.
    public static let maxFramesPerStroke = 1 + Board.maxPointsPerStroke + 1
}
