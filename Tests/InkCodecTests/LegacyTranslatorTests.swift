import Testing
@testable import InkCodec

private let app = AuthorID(1)

private func p(_ stroke: UInt32, _ phase: StrokePhase, _ x: Int32, tool: Tool = .pen) -> Command {
    .point(StrokePoint(stroke: StrokeID(stroke), tool: tool, phase: phase, x: x, y: x))
}

private func lp(_ phase: StrokePhase, _ x: Int32, tool: Tool = .pen) -> LegacyMessage {
    .point(tool: tool, x: x, y: x, phase: phase)
}

@Test func inboundPointsGetStrokeIdsAndUndoRedoNameThem() {
    var t = LegacyTranslator(author: app)
    #expect(t.command(from: .undo) == .undo(LegacyTranslator.noStroke))  // nothing to undo yet
    #expect(t.command(from: lp(.start, 1)) == p(1, .start, 1))
    #expect(t.command(from: lp(.move, 2)) == p(1, .move, 2))
    #expect(t.command(from: lp(.end, 3)) == p(1, .end, 3))
    #expect(t.command(from: lp(.move, 4)) == p(2, .move, 4))  // no open stroke: a new one
    #expect(t.command(from: lp(.end, 5)) == p(2, .end, 5))
    #expect(t.command(from: .undo) == .undo(StrokeID(2)))
    #expect(t.command(from: .undo) == .undo(StrokeID(1)))
    #expect(t.command(from: .redo) == .redo(StrokeID(1)))
    #expect(t.command(from: lp(.start, 6)) == p(3, .start, 6))
    #expect(t.command(from: .redo) == .redo(LegacyTranslator.noStroke))  // a new line ends redo
    #expect(t.command(from: .penStyle(PenStyle(color: 2, width: 3)!)) == .penStyle(PenStyle(color: 2, width: 3)!))
    #expect(t.command(from: .clear) == .clear)
    #expect(t.command(from: .undo) == .undo(LegacyTranslator.noStroke))
    #expect(t.nextStroke == StrokeID(4))
}

@Test func inboundUndoTargetsMatchTheBoard() {
    var t = LegacyTranslator(author: app)
    var board = Board()
    let script: [LegacyMessage] = [lp(.start, 1), lp(.end, 1), lp(.start, 2), lp(.end, 2), .undo, lp(.start, 3),
                                   .undo, .undo, .redo, .redo, .redo, .undo]
    for m in script {
        let c = t.command(from: m)
        if case .undo(let id) = c, id != LegacyTranslator.noStroke { #expect(board.author(app).undoStack.last == id) }
        if case .redo(let id) = c, id != LegacyTranslator.noStroke { #expect(board.author(app).redoStack.last == id) }
        board.apply(c, author: app)
    }
}
