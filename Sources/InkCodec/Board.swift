// The board: a pure, deterministic fold over the room log.

/// The state a room's command log folds to. The same fold runs in the daemon, in native clients
/// and in tests, so "same log => same board" is checked by comparing `digest`.
///
/// Rules (docs/protocol.md section 1):
/// - A point for a stroke the board does not have creates it, with the author's current pen and
///   page and the point's tool; the stroke goes on top of the author's undo stack and the
///   author's redo stack is discarded (those strokes are deleted). Later points append to it,
///   even after `end` or while it is undone (late points of a stroke undone early are kept).
///   Points that arrive after their stroke was cleared or erased start it again.
/// - `undo(s)` hides the author's stroke `s` if it is on the author's undo stack and moves it to
///   the redo stack; `redo(s)` reverses that. A target that is not there is a no-op.
/// - `clear` deletes every stroke on the author's current page; `erase(ref)` deletes one stroke.
///   Deleted strokes leave every undo/redo stack; neither is undoable.
/// - `background` sets (or removes) the background of an existing page.
/// - `switchPage`/`room(.presentPage)`/`background` for a page that does not exist, and
///   `unknown`, are no-ops.
/// - Every collection has a bound below; input past a bound is dropped, deterministically.
public struct Board: Sendable, Hashable {
    /// Strokes kept at once; points that would start more are dropped.
    public static let maxStrokes = 1 << 20
    /// Points kept per stroke; later points of a full stroke are dropped.
    public static let maxPointsPerStroke = 1 << 16
    /// Pages; `addPage` beyond this is dropped.
    public static let maxPages = 1024
    /// Undo (and redo) depth per author: the oldest entry falls off (its stroke stays drawn).
    public static let maxUndoDepth = 1024
    /// Authors with state; commands of further authors are dropped.
    public static let maxAuthors = 1 << 16

    /// A point as the board keeps it (the phase only matters while drawing).
    public struct Point: Hashable, Sendable {
        public var x: Int32
        public var y: Int32
    }

    public struct Stroke: Hashable, Sendable {
        public var ref: StrokeRef
        public var page: PageID
        public var tool: Tool
        public var style: PenStyle
        public var points: [Point]
        /// False while undone.
        public var isVisible: Bool
        /// True once an `end` point arrived.
        public var isEnded: Bool
    }

    public struct AuthorState: Hashable, Sendable {
        public var pen: PenStyle = .initial
        public var page: PageID = .first
        /// The author's strokes that `undo` may hide, most recent last.
        public var undoStack: [StrokeID] = []
        /// The author's undone strokes that `redo` may show, most recently undone last.
        public var redoStack: [StrokeID] = []
        public init() {}
    }

    /// Pages in creation order.
    public private(set) var pages: [PageID] = [.first]
    public private(set) var isLocked = false
    public private(set) var presentedPage: PageID? = nil
    /// Each page's background image, if it has one.
    public private(set) var backgrounds: [PageID: BackgroundImage] = [:]

    private(set) var strokes: [StrokeRef: Stroke] = [:]
    /// Drawing order (eraser strokes only erase what is below them).
    private(set) var order: [StrokeRef] = []
    private(set) var authors: [AuthorID: AuthorState] = [:]

    public init() {}

    // MARK: reading

    public var strokeCount: Int { order.count }

    public func stroke(_ ref: StrokeRef) -> Stroke? { strokes[ref] }

    /// Every stroke on `page` (visible and undone), in drawing order.
    public func strokes(on page: PageID) -> [Stroke] {
        order.compactMap { ref in strokes[ref].flatMap { $0.page == page ? $0 : nil } }
    }

    /// The strokes a viewer of `page` sees, in drawing order.
    public func visibleStrokes(on page: PageID) -> [Stroke] {
        strokes(on: page).filter(\.isVisible)
    }

    public func author(_ id: AuthorID) -> AuthorState { authors[id] ?? AuthorState() }

    // MARK: folding

    public mutating func apply(_ batch: Batch) {
        for timed in batch.commands { apply(timed.command, author: batch.author) }
    }

    public mutating func apply(_ command: Command, author: AuthorID) {
        switch command {
        case .point(let point): addPoint(point, author: author)
        case .penStyle(let style): updateAuthor(author) { $0.pen = style }
        case .undo(let id): undo(id, author: author)
        case .redo(let id): redo(id, author: author)
        case .clear: clearPage(self.author(author).page)
        case .erase(let ref): delete([ref])
        case .addPage(let page):
            if !pages.contains(page) && pages.count < Board.maxPages { pages.append(page) }
        case .switchPage(let page):
            if pages.contains(page) { updateAuthor(author) { $0.page = page } }
        case .room(.lock): isLocked = true
        case .room(.unlock): isLocked = false
        case .room(.presentPage(let page)):
            if pages.contains(page) { presentedPage = page }
        case .background(let background):
            if pages.contains(background.page) { backgrounds[background.page] = background.image }
        case .unknown: break
        }
    }

    private mutating func updateAuthor(_ id: AuthorID, _ change: (inout AuthorState) -> Void) {
        if authors[id] == nil {
            guard authors.count < Board.maxAuthors else { return }
            authors[id] = AuthorState()
        }
        change(&authors[id]!)
    }

    private mutating func addPoint(_ point: StrokePoint, author: AuthorID) {
        let ref = StrokeRef(author: author, stroke: point.stroke)
        if strokes[ref] == nil {
            guard order.count < Board.maxStrokes, authors[author] != nil || authors.count < Board.maxAuthors else { return }
            var state = self.author(author)
            let discarded = state.redoStack
            state.redoStack = []
            state.undoStack.append(point.stroke)
            if state.undoStack.count > Board.maxUndoDepth { state.undoStack.removeFirst() }
            authors[author] = state
            delete(discarded.map { StrokeRef(author: author, stroke: $0) })
            strokes[ref] = Stroke(ref: ref, page: state.page, tool: point.tool, style: state.pen,
                                  points: [], isVisible: true, isEnded: false)
            order.append(ref)
        }
        strokes[ref]!.append(point)
    }

    private mutating func undo(_ id: StrokeID, author: AuthorID) {
        let ref = StrokeRef(author: author, stroke: id)
        guard let index = authors[author]?.undoStack.lastIndex(of: id), strokes[ref] != nil else { return }
        updateAuthor(author) { s in
            s.undoStack.remove(at: index)
            s.redoStack.append(id)
            if s.redoStack.count > Board.maxUndoDepth { s.redoStack.removeFirst() }
        }
        strokes[ref]!.isVisible = false
    }

    private mutating func redo(_ id: StrokeID, author: AuthorID) {
        let ref = StrokeRef(author: author, stroke: id)
        guard let index = authors[author]?.redoStack.lastIndex(of: id), strokes[ref] != nil else { return }
        updateAuthor(author) { s in
            s.redoStack.remove(at: index)
            s.undoStack.append(id)
            if s.undoStack.count > Board.maxUndoDepth { s.undoStack.removeFirst() }
        }
        strokes[ref]!.isVisible = true
    }

    private mutating func clearPage(_ page: PageID) {
        delete(order.filter { strokes[$0]?.page == page })
    }

    /// Deletes strokes and takes them off every undo/redo stack.
    private mutating func delete(_ refs: [StrokeRef]) {
        let doomed = Set(refs.filter { strokes[$0] != nil })
        guard !doomed.isEmpty else { return }
        for ref in doomed { strokes[ref] = nil }
        order.removeAll { doomed.contains($0) }
        let owners = Set(doomed.map(\.author))
        for owner in owners where authors[owner] != nil {
            authors[owner]!.undoStack.removeAll { doomed.contains(StrokeRef(author: owner, stroke: $0)) }
            authors[owner]!.redoStack.removeAll { doomed.contains(StrokeRef(author: owner, stroke: $0)) }
        }
    }

    // MARK: digest

    /// FNV-1a 64 over a canonical encoding of the whole state (pages in creation order, strokes
    /// in drawing order, authors by id, authors in the initial state left out). Times are not
    /// part of the board. Equal boards have equal digests on every platform.
    public var digest: UInt64 {
        var h = FNV1a64()
        h.add(UInt8(1))  // encoding version
        h.add(UInt32(pages.count))
        for page in pages { h.add(page.rawValue) }
        h.add(isLocked)
        h.add(presentedPage != nil)
        h.add(presentedPage?.rawValue ?? 0)
        h.add(UInt32(order.count))
        for ref in order {
            let s = strokes[ref]!
            h.add(ref.author.rawValue)
            h.add(ref.stroke.rawValue)
            h.add(s.page.rawValue)
            h.add(s.tool.rawValue)
            h.add(s.style.color)
            h.add(s.style.width)
            h.add(s.isVisible)
            h.add(s.isEnded)
            h.add(UInt32(s.points.count))
            for p in s.points {
                h.add(p.x)
                h.add(p.y)
            }
        }
        let initial = AuthorState()
        let active = authors.keys.sorted().filter { authors[$0] != initial }
        h.add(UInt32(active.count))
        for id in active {
            let a = authors[id]!
            h.add(id.rawValue)
            h.add(a.pen.color)
            h.add(a.pen.width)
            h.add(a.page.rawValue)
            h.add(UInt32(a.undoStack.count))
            for s in a.undoStack { h.add(s.rawValue) }
            h.add(UInt32(a.redoStack.count))
            for s in a.redoStack { h.add(s.rawValue) }
        }
        // Backgrounds are appended only when a page has one, so boards without keep the
        // digests they had before backgrounds existed.
        if !backgrounds.isEmpty {
            h.add(UInt32(backgrounds.count))
            for page in pages {
                guard let image = backgrounds[page] else { continue }
                h.add(page.rawValue)
                for b in image.hash.bytes { h.add(b) }
                h.add(image.width)
                h.add(image.height)
                h.add(image.fit.rawValue)
            }
        }
        return h.value
    }
}

extension Board.Stroke {
    fileprivate mutating func append(_ point: StrokePoint) {
        if point.phase == .end { isEnded = true }
        guard points.count < Board.maxPointsPerStroke else { return }
        points.append(Board.Point(x: point.x, y: point.y))
    }
}
