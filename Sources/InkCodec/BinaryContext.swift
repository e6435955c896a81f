// What a binary batch is coded against: the state a sender and its receiver share.

/// One author's stroke context: everything a decoder needs from the author's earlier batches
/// to decode the next one (docs/protocol.md section 2.4). A batch decodes on its own given it.
public struct StrokeContext: Hashable, Sendable {
    /// Points of the current stroke remembered for prediction.
    public static let rememberedPoints = 3

    /// Time of the author's previous command (0 before any).
    public private(set) var timeMs: UInt64 = 0
    /// Its 60 Hz frame when it lies on the frame grid, else `UInt64.max` (derived from timeMs).
    private(set) var frame: UInt64 = 0
    /// The stroke of the author's previous point (0 before any).
    public internal(set) var stroke: StrokeID = StrokeID(0)
    /// Its tool.
    public internal(set) var tool: Tool = .pen
    /// True while that stroke has not ended (its last point was not `end`).
    public internal(set) var isOpen = false
    /// How many of its points `xs`/`ys` hold (0...3); 0 before any point.
    public internal(set) var count = 0
    /// Its last points, newest first.
    public internal(set) var xs: (Int32, Int32, Int32) = (0, 0, 0)
    public internal(set) var ys: (Int32, Int32, Int32) = (0, 0, 0)
    /// The first point of that stroke's history (the last point that started one): a new
    /// stroke's first point is predicted from it (strokes of a character start near each other).
    public internal(set) var anchorX: Int32 = 0
    public internal(set) var anchorY: Int32 = 0

    public static let initial = StrokeContext()

    public init() {}

    public static func == (a: StrokeContext, b: StrokeContext) -> Bool {
        a.timeMs == b.timeMs && a.stroke == b.stroke && a.tool == b.tool && a.isOpen == b.isOpen
            && a.count == b.count && a.xs == b.xs && a.ys == b.ys && a.anchorX == b.anchorX
            && a.anchorY == b.anchorY
    }

    public func hash(into h: inout Hasher) {
        h.combine(timeMs)
        h.combine(stroke)
        h.combine(count)
        h.combine(xs.0)
        h.combine(ys.0)
    }

    /// Records a command's time.
    @inline(__always)
    mutating func setTime(_ t: UInt64) {
        timeMs = t
        frame = BinaryPrediction.isOnGrid(t) ? BinaryPrediction.frame(t) : UInt64.max
    }

    /// Records a command's time given as a grid frame (whose time is below the grid limit).
    @inline(__always)
    mutating func setTime(_ t: UInt64, frame f: UInt64) {
        timeMs = t
        frame = f
    }

    /// Records a point. `continues` says whether it extends the remembered stroke.
    @inline(__always)
    mutating func record(_ p: StrokePoint, continues: Bool) {
        if continues {
            xs = (p.x, xs.0, xs.1)
            ys = (p.y, ys.0, ys.1)
            if count < StrokeContext.rememberedPoints { count += 1 }
        } else {
            xs = (p.x, xs.0, xs.1)
            ys = (p.y, ys.0, ys.1)
            count = 1
            anchorX = p.x
            anchorY = p.y
        }
        stroke = p.stroke
        tool = p.tool
        isOpen = p.phase != .end
    }

    /// Selects the kind table: 0 without an open stroke, else the remembered point count (1...3).
    @inline(__always)
    var kindContext: Int { isOpen ? count : 0 }

    /// Whether a point with this stroke and phase extends the remembered stroke (else it starts
    /// a new prediction history from the pen position).
    @inline(__always)
    func continues(stroke s: StrokeID, phase: StrokePhase) -> Bool {
        count > 0 && s == stroke && phase != .start
    }
}

/// The codec state of one direction of one link: the last batch's author and one
/// `StrokeContext` per author. Sender and receiver each keep one and update it batch by batch;
/// a batch encoded with `selfContained` resets it on both sides (history chunks, resync).
public struct BinaryCodecState: Sendable {
    /// Authors with a context; a batch of a further author first empties the table (both sides
    /// do the same, so they stay in step).
    public static let maxAuthors = 1024

    /// The last batch's author (valid when `hasCurrent`) and context, kept outside the table:
    /// the common case, a batch by the same author as the previous one, touches no dictionary
    /// and copies no optional.
    private var currentAuthor = AuthorID(0)
    private var hasCurrent = false
    private var currentContext = StrokeContext.initial
    /// Every other author's context.
    private var others: [AuthorID: StrokeContext] = [:]
    /// The model's tables, fetched once per state rather than once per batch decoded.
    let model = BinaryModelPointers.shared

    public init() {}

    public var lastAuthor: AuthorID? { hasCurrent ? currentAuthor : nil }

    @inline(__always)
    public func context(of author: AuthorID) -> StrokeContext {
        if hasCurrent && currentAuthor == author { return currentContext }
        return otherContext(of: author)
    }

    /// `context(of:)` written straight to `p`: a returned context took a detour through the
    /// stack (two copies of its 72 bytes a batch instead of one). Mutating only so that the
    /// state is read in place: as a non-mutating call on an inout state, the decoder first
    /// copied the whole state (96 bytes) to its stack.
    @inline(__always)
    mutating func copyContext(of author: AuthorID, to p: UnsafeMutablePointer<StrokeContext>) {
        if hasCurrent && currentAuthor == author {
            p.pointee = currentContext
        } else {
            p.pointee = otherContext(of: author)
        }
    }

    /// `context(of:)` on a state read in place (mutating only for that, see `copyContext`).
    @inline(__always)
    mutating func readContext(of author: AuthorID) -> StrokeContext {
        if hasCurrent && currentAuthor == author { return currentContext }
        return otherContext(of: author)
    }

    @inline(never)
    private func otherContext(of author: AuthorID) -> StrokeContext {
        others[author] ?? .initial
    }

    mutating func reset() {
        hasCurrent = false
        currentContext = .initial
        others.removeAll()
    }

    @inline(__always)
    mutating func commit(_ context: StrokeContext, author: AuthorID) {
        if hasCurrent && currentAuthor == author {
            currentContext = context
        } else {
            switchAuthor(to: author, context)
        }
    }

    /// `commit` of the context at `p`, read from there only on the path that stores it.
    @inline(__always)
    mutating func commit(contextAt p: UnsafePointer<StrokeContext>, author: AuthorID) {
        if hasCurrent && currentAuthor == author {
            currentContext = p.pointee
        } else {
            switchAuthor(to: author, p.pointee)
        }
    }

    @inline(never)
    private mutating func switchAuthor(to author: AuthorID, _ context: StrokeContext) {
        if hasCurrent {
            if others[currentAuthor] == nil && others.count + 1 >= BinaryCodecState.maxAuthors {
                others.removeAll()
            }
            others[currentAuthor] = currentContext
        }
        others[author] = nil
        currentAuthor = author
        hasCurrent = true
        currentContext = context
    }
}
