import Testing
@testable import InkCodec

private let app = AuthorID(1)
private let alice = AuthorID(2)
private let bob = AuthorID(3)

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

@Test func penStylesAreSentOnlyWhenTheAppsPenMustChange() {
    var t = LegacyTranslator(author: app)
    let red = PenStyle(color: 1, width: 2)!
    let eraser = PenStyle(color: 5, width: 3)!
    #expect(t.messages(for: .penStyle(red), author: alice) == [.penStyle(red)])  // first author: straight through
    #expect(t.messages(for: .penStyle(eraser), author: bob) == [])  // bob's pen: sent when bob draws
    #expect(t.messages(for: p(1, .start, 1), author: alice) == [lp(.start, 1)])
    #expect(t.messages(for: p(1, .end, 2), author: alice) == [lp(.end, 2)])
    #expect(t.messages(for: p(1, .start, 3, tool: .eraser), author: bob) == [.penStyle(eraser), lp(.start, 3, tool: .eraser)])
    #expect(t.messages(for: p(1, .end, 4, tool: .eraser), author: bob) == [lp(.end, 4, tool: .eraser)])
    #expect(t.messages(for: p(2, .start, 5), author: alice) == [.penStyle(red), lp(.start, 5)])
    #expect(t.appPen == red)
    #expect(t.messages(for: p(9, .start, 5), author: app) == [])  // the app's own: never echoed
}

@Test func otherAuthorsWaitWhileALineIsOpen() {
    var t = LegacyTranslator(author: app)
    #expect(t.messages(for: p(1, .start, 1), author: alice) == [lp(.start, 1)])
    #expect(t.messages(for: p(1, .start, 10), author: bob) == [])
    #expect(t.messages(for: .clear, author: bob) == [])
    #expect(t.messages(for: p(1, .move, 2), author: alice) == [lp(.move, 2)])
    #expect(t.messages(for: p(1, .end, 3), author: alice) == [lp(.end, 3), lp(.start, 10), .clear])
}

@Test func undoAndRedoAreSentOnlyForTheTopLine() {
    var t = LegacyTranslator(author: app)
    for c in [p(1, .start, 1), p(1, .end, 1)] { _ = t.messages(for: c, author: alice) }
    for c in [p(1, .start, 2), p(1, .end, 2)] { _ = t.messages(for: c, author: bob) }
    #expect(t.messages(for: .undo(StrokeID(1)), author: bob) == [.undo])
    #expect(t.messages(for: .redo(StrokeID(1)), author: bob) == [.redo])
    #expect(t.messages(for: .undo(LegacyTranslator.noStroke), author: alice) == [])  // no-op
    #expect(!t.needsRedraw)
    #expect(t.messages(for: .undo(StrokeID(1)), author: alice) == [])  // not on top: inexpressible
    #expect(t.needsRedraw)
}

@Test func inexpressibleCommandsAskForARedrawThatRepaintsTheBoard() {
    var t = LegacyTranslator(author: app)
    var board = Board()
    let blue = PenStyle(color: 4, width: 1)!
    let log: [(AuthorID, Command)] = [
        (alice, .penStyle(blue)), (alice, p(1, .start, 1)), (alice, p(1, .move, 2)), (alice, p(1, .end, 3)),
        (bob, p(1, .start, 4)), (bob, p(1, .end, 4)),
        (app, p(1, .start, 6)),
        (alice, .erase(StrokeRef(author: bob, stroke: StrokeID(1)))),
    ]
    for (author, c) in log {
        board.apply(c, author: author)
        _ = t.messages(for: c, author: author)
    }
    #expect(t.needsRedraw)
    #expect(t.redraw(board) == [.clear, .penStyle(blue), lp(.start, 1), lp(.move, 2), lp(.end, 3),
                                .penStyle(.initial), lp(.start, 6)])
    #expect(!t.needsRedraw)
    _ = t.messages(for: .room(.presentPage(PageID(2))), author: alice)  // no such page: ignored
    #expect(!t.needsRedraw)
    _ = t.messages(for: .addPage(PageID(2)), author: alice)
    _ = t.messages(for: .room(.presentPage(PageID(2))), author: alice)
    #expect(t.needsRedraw && t.appPage == PageID(2))
}

@Test func clearsOfOtherPagesAreNotShown() {
    var t = LegacyTranslator(author: app)
    #expect(t.messages(for: .addPage(PageID(3)), author: bob) == [])
    #expect(t.messages(for: .switchPage(PageID(3)), author: alice) == [])
    #expect(t.messages(for: p(1, .start, 1), author: alice) == [])
    #expect(t.messages(for: .clear, author: alice) == [])
    #expect(t.messages(for: .clear, author: bob) == [.clear])
}

@Test func aLineThatNeverEndsIsAbandonedAtTheBound() {
    var t = LegacyTranslator(author: app)
    _ = t.messages(for: p(1, .start, 1), author: alice)
    var sent: [LegacyMessage] = []
    for i in 0...LegacyTranslator.maxDeferredCommands {
        sent += t.messages(for: .penStyle(PenStyle(color: UInt8(i % 5), width: 1)!), author: bob)
    }
    #expect(t.needsRedraw)
    #expect(sent.isEmpty)  // bob's pens wait for his first line
    #expect(t.messages(for: p(1, .start, 9), author: bob).count == 2)
}
