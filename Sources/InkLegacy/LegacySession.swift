// One HYWhiteboard app connected to a room: its bytes in, the room's board out. Sans-IO.
import InkCodec
import InkProtocol

/// Why a session ends.
public enum LegacyCloseReason: Sendable, Hashable, CustomStringConvertible {
    /// No heartbeat for `silenceTimeout` (the app is gone, or stopped reading).
    case silent(milliseconds: UInt64)
    /// The app's byte stream cannot be parsed further.
    case badFrame(LegacyFrameError)

    public var description: String {
        switch self {
        case .silent(let ms): "no heartbeat for \(ms) ms"
        case .badFrame(let error): "bad frame: \(error)"
        }
    }
}

/// What the caller must act on, in order.
public enum LegacySessionEvent: Sendable, Hashable {
    /// The app's commands, as one batch of this session's author, for the room.
    case submit([TimedCommand])
    /// Close the connection.
    case close(LegacyCloseReason)
}

/// Counts of what the session did and of what it could not follow; for metrics and tests.
public struct LegacySessionStats: Sendable, Equatable {
    public var chunksSent = 0
    public var messagesIn = 0
    public var messagesOut = 0
    /// Text frames the app sent that do not parse, or are not whiteboard text.
    public var skippedIn = 0
    /// Foreign strokes shown whole.
    public var strokesShown = 0
    /// Lines taken off the app by walking its "other" undo chain.
    public var linesHidden = 0
    /// Clears written to repaint the app (a change its commands cannot make one line at a time).
    public var repaints = 0
    /// Of `repaints`: the app's user drew while a repaint was being drawn, so its new lines stood
    /// below its own older ones (drawn again as another user's); the page was drawn again once
    /// the user paused.
    public var reorderRepaints = 0
    /// Pen styles written again after the app's user picked a pen while one of ours was in flight.
    public var penReasserts = 0
    /// The app reported an action its state (as we know it) cannot have produced.
    public var drifts = 0
    /// The app put points on a line that is not their stroke's (they stay on its screen only
    /// until we redraw that line).
    public var misplacedPoints = 0
    /// Inputs after which the app, by its own code, crashes (we never send these; the app can
    /// reach them only through its own actions).
    public var appCrashes = 0

    public init() {}
}

/// One legacy app in a room, as a state machine with no IO (quinn style).
///
/// The app's bytes go in with `handleBytes`; the room's accepted batches (its own included, in
/// room order) with `handleRoomBatch`, after `handleJoined` gave the board. Out come the app's
/// commands for the room (`pollEvent`: `.submit`), the writes for the app (`pollTransmit`:
/// chunks of exactly 1030 bytes, to be sent each as one TCP segment, at once) and the next
/// deadline (`pollTimeout`, then `handleTimeout`, early or twice is harmless).
///
/// ## Call order (the caller)
/// 1. `init(now:)` when the TCP connection opens.
/// 2. `handleJoined` when the room accepted the join; `handleRoomBatch` for every batch of
///    the room after that, in room order, own ones too (`own: true`).
/// 3. `handleBytes` for every read from the app; `handleTimeout` when `pollTimeout` passes.
/// After every input: drain `pollEvent` (submit each batch to the room, close on `.close`),
/// then call `pollTransmit` while the connection can send a chunk now, and re-arm the timer.
/// A chunk is built when it is polled, from the state at that instant, so it must go out at
/// once (what the app will see is decided by when it is sent).
///
/// ## What the app sees
/// The app shows every other author as one user, "Other", and applies what it receives with
/// its own pen and filter; it locks local drawing while a received line is open. So the session
/// keeps a replica of the app's lines (`LegacyAppMirror`) and the room's board, and writes
/// only: whole strokes (start to end in consecutive chunks, so the app is locked only while it
/// reads one stroke), each with the pen it needs and followed by the app's own pen; undo of the
/// app's top "other" lines to hide a stroke (lines above it are drawn again); a clear when the
/// room clears the page, or to repaint what single commands cannot change. Foreign strokes,
/// clears and pens reach the app only when its user is not drawing: at the moment the end of
/// its stroke arrives, or after `quietAfterInput` without input.
///
/// ## What the room gets
/// The app's own actions, interpreted with the app's own state: a point goes to the line its
/// pointer names, an undo or redo acts on the line its stacks name. An undo, redo or clear the
/// app sent at once while the points before it were still in its 60 ms buffer is placed after
/// those points.
public final class LegacySession {
    public let configuration: LegacySessionConfiguration
    public internal(set) var stats = LegacySessionStats()
    /// This app's author id in the room (after `handleJoined`).
    public internal(set) var author: AuthorID?
    public internal(set) var closed: LegacyCloseReason?

    let openedAt: Instant
    // The app's side.
    var decoder = LegacyFrameDecoder()
    var lastHeartbeatHeard: Instant
    var lastChunkSent: Instant?
    /// The app's screen as far as we know.
    var mirror = LegacyAppMirror()
    /// The pen the app's user picked last (what its own lines must be drawn with).
    var ownPen = PenStyle.initial
    /// The app's user has a finger on the board (its last point was not an end).
    var drawing = false
    /// The app's latest own stroke.
    var appStroke: StrokeRef?
    /// The app's newest own line since its lines were last emptied (by a clear or a repaint).
    var newestOwnLine: StrokeID?
    /// An own older line was shown above the app's newer ones: repaint when its user pauses.
    var reorderWanted = false
    /// The latest drawing order of each author's strokes shown since the app's lines were last
    /// emptied (an upper bound: lines taken off since are not subtracted).
    var topShownOrder: [AuthorID: UInt64] = [:]
    var lastInputAt: Instant?
    /// The app just reported the end of its stroke (or a button): writes are safe until then.
    var safeUntil: Instant?
    var nextStroke: UInt32 = 1
    var pendingEdits: [PendingEdit] = []
    /// Messages that arrived behind a pending edit, with their arrival time.
    var held: [(message: LegacyMessage, at: Instant)] = []
    /// We wrote a pen style at this time (a pick of the app's user may have crossed it).
    var penWrittenAt: Instant?
    var reassertPen = false

    // The room's side.
    var board = Board()
    /// The author's pen and page as submitted to the room.
    var roomPen = PenStyle.initial
    var roomPage = PageID.first
    var submitted: [TimedCommand] = []
    /// Batches submitted and not yet seen back in room order.
    var unechoed = 0
    /// When each foreign stroke last got a point (for `staleStroke`), while it has no end.
    var openForeign: [StrokeRef: Instant] = [:]
    /// Foreign strokes without an end whose author went quiet: shown as they are.
    var staleForeign: Set<StrokeRef> = []
    /// Points of each shown foreign stroke when we drew it (more arriving means redraw it).
    var shownPoints: [StrokeRef: Int] = [:]
    var pendingClear = false
    var pendingRepaint = false
    /// Strokes that may need showing (ended, stale, redone, or taken off to reach a line below).
    var candidates = LegacyShowQueue()
    /// Every stroke's place in the board's drawing order (the order strokes are shown in).
    var drawnOrder: [StrokeRef: UInt64] = [:]
    var orderCounter: UInt64 = 0
    /// Recompute `candidates` from the whole board (joined, cleared, repainted).
    var rebuildShow = false
    /// Lines the app has may show what the board no longer has there (undo, erase, more points).
    var checkShown = false
    /// Lines the app changed on its own in a way the board does not have (checked with `checkShown`).
    var misshown: Set<Int> = []
    /// Own strokes back from the room that the app may not show (its lines went in a clear).
    var ownUnshown: Set<StrokeRef> = []
    /// The queued frames end with a whole stroke (room for the pen after it is kept).
    var frameEndsShow = false
    /// The pen the queued stroke is drawn with, and the app's pen before its frames.
    var opPen: PenStyle?
    var penBeforeOp: PenStyle?
    /// After a clear we wrote, no new line before this instant (see `produce`).
    var linesHeldUntil: Instant?
    /// When we last wrote a clear, and when the app's last stroke started.
    var clearWrittenAt: Instant?
    var lastStartAt = Instant.zero
    /// Something changed that may need writing.
    var dirty = true
    /// The latest `now` any input or poll brought (deadlines at or before it are not reported:
    /// work due now is done by the next `pollTransmit`).
    var lastNow: Instant

    // Output.
    var writer = LegacyChunkWriter()
    /// Frames of the operation under way (a stroke is written whole once begun).
    var frames: [[UInt8]] = []
    var frameStart = 0
    var events: [LegacySessionEvent] = []
    var eventStart = 0

    public init(configuration: LegacySessionConfiguration = LegacySessionConfiguration(), now: Instant) {
        self.configuration = configuration
        openedAt = now
        lastHeartbeatHeard = now
        lastNow = now
    }

    func advance(_ now: Instant) { if now > lastNow { lastNow = now } }

    /// `ref` may need showing, in its place in the drawing order.
    func addCandidate(_ ref: StrokeRef) { candidates.insert(ref, order: drawnOrder[ref] ?? .max) }

    /// The page the app shows: the presented one, else the first.
    var shownPage: PageID { board.presentedPage ?? .first }
    var screenReadyAt: Instant { openedAt + configuration.screenWait }

    /// The background of the page the app shows (its board connection cannot carry it: an app
    /// in server mode gets it on its upload port, `LegacyImagePush`).
    public var shownBackground: BackgroundImage? { board.backgrounds[shownPage] }

    // MARK: polls

    public func pollEvent() -> LegacySessionEvent? {
        guard eventStart < events.count else { return nil }
        let e = events[eventStart]
        eventStart += 1
        if eventStart == events.count {
            events.removeAll(keepingCapacity: true)
            eventStart = 0
        }
        return e
    }

    /// The earliest instant after the last input at which `handleTimeout` or `pollTransmit` has
    /// work (what is due already waits for the next `pollTransmit`: a connection that cannot
    /// send now calls it when it can).
    public func pollTimeout() -> Instant? {
        guard closed == nil else { return nil }
        var next = lastHeartbeatHeard + configuration.silenceTimeout
        func consider(_ t: Instant?) { if let t, t > lastNow, t < next { next = t } }
        consider((lastChunkSent ?? openedAt) + configuration.heartbeatInterval)
        if author != nil && dirty {
            consider(screenReadyAt)
            if let last = lastInputAt { consider(last + (drawing ? configuration.staleStroke : configuration.quietAfterInput)) }
            consider(linesHeldUntil)
        }
        for edit in pendingEdits where !edit.afterNextEnd { consider(edit.deadline) }
        if author != nil, let oldest = openForeign.values.min() { consider(oldest + configuration.staleStroke) }
        return next
    }

    public func handleTimeout(now: Instant) {
        guard closed == nil else { return }
        advance(now)
        if now >= lastHeartbeatHeard + configuration.silenceTimeout {
            close(.silent(milliseconds: configuration.silenceTimeout.microseconds / 1000))
            return
        }
        placeDueEdits(now: now)
        markStale(now: now)
        flushSubmitted(now: now)
    }

    func emit(_ e: LegacySessionEvent) { events.append(e) }

    func close(_ reason: LegacyCloseReason) {
        guard closed == nil else { return }
        closed = reason
        emit(.close(reason))
    }
}
