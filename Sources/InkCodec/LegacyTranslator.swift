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
///   of the page the app shows. What legacy cannot express (undo of an older line, erase, a
///   change of the presented page, late points of a finished line) sets `needsRedraw`: the
///   caller then sends `redraw(board)` (a clear and every visible stroke of the page).
///
/// The caller must pass every command of other authors, in room order, through
/// `messages(for:author:)`, even ones it will not forward, and must not pass the app's own.
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
    private var lastAuthor: AuthorID?
    private var openLine: StrokeRef?
    private var appLines: [StrokeRef] = []
    private var appRedo: [StrokeRef] = []
    private var deferred: [(author: AuthorID, command: Command)] = []

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

    private mutating func forward(_ command: Command, author: AuthorID, into out: inout [LegacyMessage]) {
        guard author != self.author else { return }
        if let line = openLine, line.author == author, !deferred.contains(where: { $0.author == author }) {
            process(command, author: author, into: &out)  // the open line's author goes on
        } else {
            deferred.append((author, command))
        }
        flushDeferred(into: &out)
        if deferred.count > LegacyTranslator.maxDeferredCommands {
            openLine = nil  // the open line never ended: give up on it
            needsRedraw = true
            flushDeferred(into: &out)
        }
    }

    /// Sends held-back commands, oldest first, while no other author's line is open.
    private mutating func flushDeferred(into out: inout [LegacyMessage]) {
        while let next = deferred.first, openLine == nil || openLine?.author == next.author {
            deferred.removeFirst()
            process(next.command, author: next.author, into: &out)
        }
    }

    private mutating func process(_ command: Command, author: AuthorID, into out: inout [LegacyMessage]) {
        switch command {
        case .point(let p):
            forwardPoint(p, author: author, into: &out)
        case .penStyle(let style):
            if pens[author] != nil || pens.count < LegacyTranslator.maxTrackedAuthors { pens[author] = style }
            if lastAuthor == nil || lastAuthor == author {
                out.append(.penStyle(style))
                appPen = style
                lastAuthor = author
            }
        case .undo(let id):
            let ref = StrokeRef(author: author, stroke: id)
            if appLines.last == ref {
                appLines.removeLast()
                LegacyTranslator.push(ref, on: &appRedo)
                if openLine == ref { openLine = nil }
                out.append(.undo)
                lastAuthor = author
            } else if appLines.contains(ref) {
                needsRedraw = true
            }
        case .redo(let id):
            let ref = StrokeRef(author: author, stroke: id)
            if appRedo.last == ref {
                appRedo.removeLast()
                LegacyTranslator.push(ref, on: &appLines)
                out.append(.redo)
                lastAuthor = author
            } else if appRedo.contains(ref) {
                needsRedraw = true
            }
        case .clear:
            let page = pages[author] ?? .first
            if page == .first {  // a legacy author always draws on the first page
                ownUndo = []
                ownRedo = []
            }
            if page == appPage {
                appLines = []
                appRedo = []
                openLine = nil
                out.append(.clear)
                lastAuthor = author
            }
        case .erase(let ref):
            if ref.author == self.author {
                ownUndo.removeAll { $0 == ref.stroke }
                ownRedo.removeAll { $0 == ref.stroke }
            }
            if appLines.contains(ref) || appRedo.contains(ref) { needsRedraw = true }
        case .switchPage(let page):
            if pages[author] != nil || pages.count < LegacyTranslator.maxTrackedAuthors { pages[author] = page }
        case .room(.presentPage(let page)):
            if page != appPage {
                appPage = page
                needsRedraw = true
            }
        case .addPage, .room(.lock), .room(.unlock), .unknown:
            break
        }
    }

    private mutating func forwardPoint(_ p: StrokePoint, author: AuthorID, into out: inout [LegacyMessage]) {
        guard (pages[author] ?? .first) == appPage else { return }
        let ref = StrokeRef(author: author, stroke: p.stroke)
        if openLine != ref {
            // The app would start a new line: right for a new stroke, wrong for one it has.
            if appLines.contains(ref) || appRedo.contains(ref) {
                if p.phase == .end { needsRedraw = true }
                return
            }
            let pen = pens[author] ?? .initial
            if pen != appPen {
                out.append(.penStyle(pen))
                appPen = pen
            }
            LegacyTranslator.push(ref, on: &appLines)
            appRedo = []
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
        ownUndo = []
        ownRedo = []
        openLine = nil
        deferred = []
        lastAuthor = nil
        needsRedraw = false
        for stroke in board.visibleStrokes(on: appPage) where !stroke.points.isEmpty {
            if stroke.style != appPen {
                out.append(.penStyle(stroke.style))
                appPen = stroke.style
            }
            let last = stroke.points.count - 1
            for (i, point) in stroke.points.enumerated() {
                let phase: StrokePhase = i == 0 ? .start : (i == last && stroke.isEnded ? .end : .move)
                out.append(.point(tool: stroke.tool, x: point.x, y: point.y, phase: phase))
            }
            if stroke.isEnded && last == 0 {
                out.append(.point(tool: stroke.tool, x: stroke.points[0].x, y: stroke.points[0].y, phase: .end))
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
