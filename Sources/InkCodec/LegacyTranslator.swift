// Per-connection translation between one legacy HYWhiteboard app and a room's stroke model.

/// Translates one legacy connection both ways (docs/protocol.md section 3).
///
/// Inbound, `command(from:)` turns each app message into exactly one model command of `author`:
/// points get stroke ids from a counter (a new id at every `start`, or at any point when no
/// stroke is open), a legacy undo/redo names the stroke the app means (its own last drawn /
/// last undone line, mirrored here), pen styles pass through.
///
/// Outbound, `messages(for:author:)` turns every other author's command, in room order, into
/// what the app must receive. The app knows one "other side" with one pen, one line being drawn
/// and one undo stack, so the translator
/// - emits `3,c,w` before a line only when the app's pen differs from the line's author's pen
///   (and passes pen styles of the author it last forwarded straight through);
/// - holds back other authors' commands while a line is open and sends them after its end
///   (at most `maxDeferredCommands`);
/// - sends `4`/`5` only for the line on top of the app's undo/redo stack and `6` only for a clear
///   of the page the app shows. What legacy cannot express (undo or redo of another line, erase
///   of a shown line, a change of the presented page, late points of a finished line) sets
///   `needsRedraw`: the caller then sends `redraw(board)` (a clear and every visible stroke of
///   the page), with the board that has every command passed so far applied.
///
/// Call order: for each command the room accepts, in room order, apply it to the board, then
/// pass it to `messages(for:author:)` (all of them, also pages and room commands; the app's own
/// are ignored), send the result, and if `needsRedraw` send `redraw(board)`.
public struct LegacyTranslator: Sendable {
    /// Lines remembered on each of the app's undo and redo stacks (oldest fall off).
    public static let maxTrackedLines = Board.maxUndoDepth
    /// Commands held back while another author's line is open; past it the line is abandoned.
    public static let maxDeferredCommands = 4096
    /// Other authors whose pen and page are remembered; later ones count as initial.
    public static let maxTrackedAuthors = 4096
    /// The id the counter starts at; 0 is never a stroke: `undo(0)`/`redo(0)` stand for a
    /// legacy undo/redo with nothing to act on (a no-op that survives a round trip).
    public static let noStroke = StrokeID(0)

    /// The room member this connection draws as.
    public let author: AuthorID

    // Inbound: the app's own drawing.
    public private(set) var nextStroke: StrokeID
    private var openStroke: StrokeID?
    private var ownUndo: [StrokeID] = []
    private var ownRedo: [StrokeID] = []

    // Outbound: what the app has been shown.
    /// The pen the app applies to the next points it receives.
    public private(set) var appPen: PenStyle = .initial
    /// The page whose strokes the app shows.
    public private(set) var appPage: PageID = .first
    /// True when the app's picture can no longer be fixed by single messages: send `redraw`.
    public private(set) var needsRedraw = false
    private var pens: [AuthorID: PenStyle] = [:]
    private var pages: [AuthorID: PageID] = [:]
    /// The room's pages, as `Board` has them (switching to a missing page is a no-op there).
    private var existingPages: [PageID] = [.first]
    private var lastAuthor: AuthorID?
    private var openLine: StrokeRef?
    private var appLines: [StrokeRef] = []
    private var appRedo: [StrokeRef] = []
    /// Lines the app undid and can no longer redo (a new line emptied its redo stack).
    private var appUndone: [StrokeRef] = []
    private var deferred: [(author: AuthorID, item: Pending)] = []
    /// How many of `deferred` each author has.
    private var heldBack: [AuthorID: Int] = [:]

    public init(author: AuthorID, firstStroke: StrokeID = StrokeID(1)) {
        self.author = author
        self.nextStroke = firstStroke == LegacyTranslator.noStroke ? StrokeID(1) : firstStroke
    }

    // MARK: app -> model

    /// The model command (of `author`) for one message from the app.
    public mutating func command(from message: LegacyMessage) -> Command {
        switch message {
        case .point(let tool, let x, let y, let phase):
            let stroke: StrokeID
            if phase == .start || openStroke == nil {
                stroke = nextStroke
                nextStroke = StrokeID(nextStroke.rawValue &+ 1 == 0 ? 1 : nextStroke.rawValue &+ 1)
                LegacyTranslator.push(stroke, on: &ownUndo)
                ownRedo = []
            } else {
                stroke = openStroke!
            }
            openStroke = phase == .end ? nil : stroke
            return .point(StrokePoint(stroke: stroke, tool: tool, phase: phase, x: x, y: y))
        case .penStyle(let style):
            return .penStyle(style)
        case .undo:
            guard let target = ownUndo.popLast() else { return .undo(LegacyTranslator.noStroke) }
            LegacyTranslator.push(target, on: &ownRedo)
            if openStroke == target { openStroke = nil }
            return .undo(target)
        case .redo:
            guard let target = ownRedo.popLast() else { return .redo(LegacyTranslator.noStroke) }
            LegacyTranslator.push(target, on: &ownUndo)
            return .redo(target)
        case .clear:
            ownUndo = []
            ownRedo = []
            openStroke = nil
            return .clear
        }
    }

    /// `command(from:)` with the time the message arrived.
    public mutating func timedCommand(from message: LegacyMessage, timeMs: UInt64) -> TimedCommand {
        TimedCommand(timeMs: timeMs, command: command(from: message))
    }

    // MARK: model -> app

    /// What the app must receive for `command` of another author, in order.
    public mutating func messages(for command: Command, author: AuthorID) -> [LegacyMessage] {
        var out: [LegacyMessage] = []
        forward(command, author: author, into: &out)
        return out
    }

    /// A command of another author with what it needs from the room's state at its place in
    /// room order: the app may get it later, after another author's line.
    private enum Pending {
        case point(StrokePoint, pen: PenStyle, page: PageID)
        case penStyle(PenStyle)
        case undo(StrokeRef)
        case redo(StrokeRef)
        case clear(page: PageID)
        case erase(StrokeRef)
        case present(PageID)
    }

    private mutating func forward(_ command: Command, author: AuthorID, into out: inout [LegacyMessage]) {
        guard author != self.author else { return }
        // Room state is followed in room order, as `Board` does.
        let page = pages[author] ?? .first
        let item: Pending
        switch command {
        case .point(let p):
            item = .point(p, pen: pens[author] ?? .initial, page: page)
        case .penStyle(let style):
            if pens[author] != nil || pens.count < LegacyTranslator.maxTrackedAuthors { pens[author] = style }
            item = .penStyle(style)
        case .undo(let id):
            item = .undo(StrokeRef(author: author, stroke: id))
        case .redo(let id):
            item = .redo(StrokeRef(author: author, stroke: id))
        case .clear:
            if page == .first {  // a legacy author always draws on the first page
                ownUndo = []
                ownRedo = []
            }
            item = .clear(page: page)
        case .erase(let ref):
            if ref.author == self.author {
                ownUndo.removeAll { $0 == ref.stroke }
                ownRedo.removeAll { $0 == ref.stroke }
            }
            item = .erase(ref)
        case .addPage(let new):
            if !existingPages.contains(new) && existingPages.count < Board.maxPages { existingPages.append(new) }
            return
        case .switchPage(let target):
            if existingPages.contains(target) && (pages[author] != nil || pages.count < LegacyTranslator.maxTrackedAuthors) {
                pages[author] = target
            }
            return
        case .room(.presentPage(let target)):
            guard existingPages.contains(target) else { return }
            item = .present(target)
        case .room(.lock), .room(.unlock), .unknown:
            return
        }
        if let line = openLine, line.author != author {
            // The board cuts the open line here (its later points start a new stroke); the app
            // would get the whole line first. Only a repaint shows that.
            switch item {
            case .clear(let page) where page == appPage: needsRedraw = true
            case .erase(let ref) where ref == line: needsRedraw = true
            default: break
            }
        }
        if let line = openLine, line.author != author || heldBack[author, default: 0] > 0 {
            deferred.append((author, item))
            heldBack[author, default: 0] += 1
            if deferred.count > LegacyTranslator.maxDeferredCommands {
                openLine = nil  // the open line never ended: give up on it
                needsRedraw = true
                flushDeferred(into: &out)
            }
        } else {
            // Nothing is held back while no line is open, so this keeps room order.
            let line = openLine
            process(item, author: author, into: &out)
            if line != nil && openLine == nil && !deferred.isEmpty { flushDeferred(into: &out) }
        }
    }

    /// Sends held-back commands, oldest first, keeping each author's order: while a line is
    /// open only its author's commands go; when it ends, the scan starts again from the oldest.
    private mutating func flushDeferred(into out: inout [LegacyMessage]) {
        var queue = deferred[...]
        var kept: [(author: AuthorID, item: Pending)] = []
        var waiting = Set<AuthorID>()  // authors with an earlier command still held back
        var index = queue.startIndex
        while index < queue.endIndex {
            let next = queue[index]
            index += 1
            let line = openLine
            if !waiting.contains(next.author) && (line == nil || line?.author == next.author) {
                process(next.item, author: next.author, into: &out)
                if line != nil && openLine == nil {  // a line ended: start again from the oldest
                    queue = (kept + queue[index...])[...]
                    index = queue.startIndex
                    kept = []
                    waiting = []
                }
            } else {
                waiting.insert(next.author)
                kept.append(next)
            }
        }
        deferred = kept
        heldBack = [:]
        for entry in kept { heldBack[entry.author, default: 0] += 1 }
    }

    private mutating func process(_ item: Pending, author: AuthorID, into out: inout [LegacyMessage]) {
        switch item {
        case .point(let p, let pen, let page):
            forwardPoint(p, pen: pen, page: page, author: author, into: &out)
        case .penStyle(let style):
            if lastAuthor == nil || lastAuthor == author {
                out.append(.penStyle(style))
                appPen = style
                lastAuthor = author
            }
        case .undo(let ref):
            if appLines.last == ref {
                appLines.removeLast()
                LegacyTranslator.push(ref, on: &appRedo)
                if openLine == ref { openLine = nil }
                out.append(.undo)
                lastAuthor = author
            } else if appLines.contains(ref) {
                needsRedraw = true  // an older line
            }
        case .redo(let ref):
            if appRedo.last == ref {
                appRedo.removeLast()
                LegacyTranslator.push(ref, on: &appLines)
                out.append(.redo)
                lastAuthor = author
            } else if appRedo.contains(ref) || appUndone.contains(ref) {
                needsRedraw = true  // not on top, or the app's redo stack lost it
            }
        case .clear(let page):
            if page == appPage {
                appLines = []
                appRedo = []
                appUndone = []
                openLine = nil
                out.append(.clear)
                lastAuthor = author
            }
        case .erase(let ref):
            if appLines.contains(ref) || appRedo.contains(ref) { needsRedraw = true }
        case .present(let page):
            if page != appPage {
                appPage = page
                needsRedraw = true
            }
        }
    }

    private mutating func forwardPoint(_ p: StrokePoint, pen: PenStyle, page: PageID, author: AuthorID,
                                       into out: inout [LegacyMessage]) {
        let ref = StrokeRef(author: author, stroke: p.stroke)
        if openLine != ref {
            guard page == appPage else { return }
            // The app would start a new line: right for a new stroke, wrong for one it has.
            if appLines.contains(ref) || appRedo.contains(ref) || appUndone.contains(ref) {
                if p.phase == .end { needsRedraw = true }
                return
            }
            if pen != appPen {
                out.append(.penStyle(pen))
                appPen = pen
            }
            LegacyTranslator.push(ref, on: &appLines)
            for lost in appRedo { LegacyTranslator.push(lost, on: &appUndone) }  // a new line ends the app's redo
            appRedo = []
            // The board starts a stroke at any point it lacks (e.g. the rest of a stroke cleared
            // while being drawn); the app starts a line only at a start.
            out.append(.point(tool: p.tool, x: p.x, y: p.y, phase: .start))
            openLine = p.phase == .end ? nil : ref
            lastAuthor = author
            return
        }
        out.append(.point(tool: p.tool, x: p.x, y: p.y, phase: p.phase))
        openLine = p.phase == .end ? nil : ref
        lastAuthor = author
    }

    /// Repaints the app from the board: a clear, then every visible stroke of `appPage` in
    /// drawing order with the pen styles they need. Resets the outbound state and
    /// `needsRedraw`. The app's own strokes come back as the other side's lines, so its own
    /// undo/redo history ends here (later legacy undo/redo are no-ops until it draws again).
    public mutating func redraw(_ board: Board) -> [LegacyMessage] {
        var out: [LegacyMessage] = [.clear]
        appLines = []
        appRedo = []
        appUndone = []
        ownUndo = []
        ownRedo = []
        openLine = nil
        deferred = []
        heldBack = [:]
        lastAuthor = nil
        needsRedraw = false
        for stroke in board.strokes(on: appPage) where !stroke.isVisible {
            LegacyTranslator.push(stroke.ref, on: &appUndone)  // a redo of it needs a redraw
        }
        for stroke in board.visibleStrokes(on: appPage) where !stroke.points.isEmpty {
            if stroke.style != appPen {
                out.append(.penStyle(stroke.style))
                appPen = stroke.style
            }
            let last = stroke.points.count - 1
            for (i, point) in stroke.points.enumerated() {
                // A one-point stroke is a lone start: the app's next start begins a new line.
                let phase: StrokePhase = i == 0 ? .start : (i == last && stroke.isEnded ? .end : .move)
                out.append(.point(tool: stroke.tool, x: point.x, y: point.y, phase: phase))
            }
            LegacyTranslator.push(stroke.ref, on: &appLines)
            if !stroke.isEnded && stroke.ref.author != self.author { openLine = stroke.ref }
        }
        if let line = openLine, board.stroke(line)?.isEnded != false || appLines.last != line {
            openLine = nil  // only the last stroke drawn can stay open in the app
        }
        return out
    }

    private static func push<T>(_ value: T, on stack: inout [T]) {
        stack.append(value)
        if stack.count > maxTrackedLines { stack.removeFirst() }
    }
}
