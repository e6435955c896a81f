// A legacy author's messages as model commands: how traces, `inkwire send` and `inkwire codec`
// read the app's text. (What a connected app sees and sends is `LegacySession`, InkLegacy.)

/// Turns one legacy author's messages, in order, into model commands of `author`: points get
/// stroke ids from a counter (a new id at every `start`, or at any point when no stroke is
/// open), a legacy undo/redo names the stroke the app means (its own last drawn / last undone
/// line, mirrored here), pen styles pass through. This is the app's own semantics for an author
/// alone on its board (docs/protocol.md section 3); a connected app, whose lines and pointers
/// other authors' lines change, is followed by `LegacySession` instead.
public struct LegacyTranslator: Sendable {
    /// Lines remembered on the undo and redo stacks (oldest fall off).
    public static let maxTrackedLines = Board.maxUndoDepth
    /// The id the counter starts at; 0 is never a stroke: `undo(0)`/`redo(0)` stand for a
    /// legacy undo/redo with nothing to act on (a no-op that survives a round trip).
    public static let noStroke = StrokeID(0)

    /// The room member these messages draw as.
    public let author: AuthorID

    public private(set) var nextStroke: StrokeID
    private var openStroke: StrokeID?
    private var ownUndo: [StrokeID] = []
    private var ownRedo: [StrokeID] = []

    public init(author: AuthorID, firstStroke: StrokeID = StrokeID(1)) {
        self.author = author
        self.nextStroke = firstStroke == LegacyTranslator.noStroke ? StrokeID(1) : firstStroke
    }

    /// The model command (of `author`) for one message.
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

    /// `command(from:)` with the time the message was made.
    public mutating func timedCommand(from message: LegacyMessage, timeMs: UInt64) -> TimedCommand {
        TimedCommand(timeMs: timeMs, command: command(from: message))
    }

    private static func push<T>(_ value: T, on stack: inout [T]) {
        stack.append(value)
        if stack.count > maxTrackedLines { stack.removeFirst() }
    }
}
