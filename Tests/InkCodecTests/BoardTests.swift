import Testing
@testable import InkCodec

private let alice = AuthorID(1)
private let bob = AuthorID(2)

private func stroke(_ id: UInt32, tool: Tool = .pen, _ xs: [Int32]) -> [Command] {
    xs.enumerated().map { i, x in
        let phase: StrokePhase = i == 0 ? .start : (i == xs.count - 1 ? .end : .move)
        return .point(StrokePoint(stroke: StrokeID(id), tool: tool, phase: phase, x: x, y: -x))
    }
}

private func fold(_ steps: [(AuthorID, Command)]) -> Board {
    var board = Board()
    for (author, command) in steps { board.apply(command, author: author) }
    return board
}

@Test func pointsBuildStrokesWithTheAuthorsPenAndPage() {
    var board = Board()
    board.apply(.penStyle(PenStyle(color: 3, width: 2)!), author: alice)
    for c in stroke(7, [10, 20, 30]) { board.apply(c, author: alice) }
    let s = board.stroke(StrokeRef(author: alice, stroke: StrokeID(7)))
    #expect(s?.points == [.init(x: 10, y: -10), .init(x: 20, y: -20), .init(x: 30, y: -30)])
    #expect(s?.style == PenStyle(color: 3, width: 2))
    #expect(s?.page == .first && s?.isEnded == true && s?.isVisible == true)
    #expect(board.author(alice).undoStack == [StrokeID(7)])
    #expect(board.author(bob) == Board.AuthorState())
}

@Test func undoAndRedoActOnTheNamedStrokeOfTheirAuthorOnly() {
    var board = Board()
    for c in stroke(1, [1, 2]) + stroke(2, [3, 4]) { board.apply(c, author: alice) }
    for c in stroke(1, [5, 6]) { board.apply(c, author: bob) }
    board.apply(.undo(StrokeID(1)), author: alice)
    #expect(board.stroke(StrokeRef(author: alice, stroke: StrokeID(1)))?.isVisible == false)
    #expect(board.stroke(StrokeRef(author: bob, stroke: StrokeID(1)))?.isVisible == true)
    #expect(board.author(alice).undoStack == [StrokeID(2)])
    #expect(board.author(alice).redoStack == [StrokeID(1)])
    let before = board.digest
    board.apply(.undo(StrokeID(1)), author: alice)  // already undone: no-op
    board.apply(.redo(StrokeID(9)), author: alice)  // unknown target: no-op
    #expect(board.digest == before)
    board.apply(.redo(StrokeID(1)), author: alice)
    #expect(board.visibleStrokes(on: .first).map(\.ref.stroke.rawValue) == [1, 2, 1])
    #expect(board.author(alice).undoStack == [StrokeID(2), StrokeID(1)])
}

@Test func aNewStrokeDiscardsTheAuthorsRedoStack() {
    var board = Board()
    for c in stroke(1, [1]) { board.apply(c, author: alice) }
    board.apply(.undo(StrokeID(1)), author: alice)
    for c in stroke(2, [2]) { board.apply(c, author: alice) }
    #expect(board.stroke(StrokeRef(author: alice, stroke: StrokeID(1))) == nil)
    #expect(board.author(alice).redoStack.isEmpty)
    #expect(board.strokeCount == 1)
}

@Test func latePointsOfAnUndoneStrokeAreKept() {
    var board = Board()
    board.apply(stroke(1, [1, 2, 3])[0], author: alice)
    board.apply(.undo(StrokeID(1)), author: alice)  // overtook the points (legacy defect)
    board.apply(stroke(1, [1, 2, 3])[1], author: alice)
    let s = board.stroke(StrokeRef(author: alice, stroke: StrokeID(1)))
    #expect(s?.points.count == 2 && s?.isVisible == false)
}

@Test func clearEmptiesOnlyTheAuthorsCurrentPageForEveryone() {
    var board = Board()
    board.apply(.addPage(PageID(4)), author: alice)
    for c in stroke(1, [1]) { board.apply(c, author: alice) }
    for c in stroke(1, [2]) { board.apply(c, author: bob) }
    board.apply(.switchPage(PageID(4)), author: bob)
    for c in stroke(2, [3]) { board.apply(c, author: bob) }
    board.apply(.clear, author: alice)
    #expect(board.strokes(on: .first).isEmpty)
    #expect(board.strokes(on: PageID(4)).map(\.ref) == [StrokeRef(author: bob, stroke: StrokeID(2))])
    #expect(board.author(alice).undoStack.isEmpty)
    #expect(board.author(bob).undoStack == [StrokeID(2)])
}

@Test func eraseRemovesAnyAuthorsStroke() {
    var board = Board()
    for c in stroke(1, [1]) { board.apply(c, author: bob) }
    board.apply(.erase(StrokeRef(author: bob, stroke: StrokeID(1))), author: alice)
    #expect(board.strokeCount == 0 && board.author(bob).undoStack.isEmpty)
}

@Test func pagesAndRoomCommands() {
    var board = Board()
    board.apply(.switchPage(PageID(2)), author: alice)  // does not exist: no-op
    #expect(board.author(alice).page == .first)
    board.apply(.addPage(PageID(2)), author: alice)
    board.apply(.addPage(PageID(2)), author: bob)
    board.apply(.switchPage(PageID(2)), author: alice)
    board.apply(.room(.presentPage(PageID(2))), author: alice)
    board.apply(.room(.lock), author: alice)
    #expect(board.pages == [.first, PageID(2)])
    #expect(board.author(alice).page == PageID(2))
    #expect(board.presentedPage == PageID(2) && board.isLocked)
    board.apply(.room(.unlock), author: alice)
    #expect(!board.isLocked)
}

@Test func unknownCommandsAreSkipped() {
    var board = Board()
    board.apply(.unknown(kind: CommandKind(rawValue: 200), payload: [1, 2, 3]), author: alice)
    #expect(board.digest == Board().digest)
}

@Test func penStyleBounds() {
    #expect(PenStyle(color: 6, width: 1) == nil)
    #expect(PenStyle(color: 5, width: 0) == nil)
    #expect(PenStyle(color: 5, width: 4) == nil)
    #expect(PenStyle(color: 5, width: 3) != nil)
    #expect(PenStyle.initial == PenStyle(color: 0, width: 1))
}

@Test func digestIsStableAndSensitive() {
    let log: [(AuthorID, Command)] = stroke(1, [5, 6, 7]).map { (alice, $0) } + [(bob, .clear)]
    #expect(fold(log).digest == fold(log).digest)
    // Pinned: an implementer on another platform must get the same numbers.
    #expect(Board().digest == 0xe259_5c44_9236_5745)
    #expect(fold(log).digest == 0xe259_5c44_9236_5745)  // bob's clear emptied page 0, stacks empty
    let drawn = fold(stroke(1, [5, 6, 7]).map { (alice, $0) })
    #expect(drawn.digest == 0x94ea_1e49_10dc_b201)
    var moved = drawn
    moved.apply(.point(StrokePoint(stroke: StrokeID(1), phase: .move, x: 8, y: 8)), author: alice)
    #expect(moved.digest != drawn.digest)
}

@Test func cutGroupsBySixtyMillisecondWindows() {
    let times: [UInt64] = [0, 10, 59, 60, 61, 200, 200, 239, 240]
    let commands = times.map { TimedCommand(timeMs: $0, command: .clear) }
    let batches = Batch.cut(commands, author: alice)
    #expect(batches.map { $0.commands.map(\.timeMs) } == [[0, 10, 59], [60, 61], [200, 200, 239], [240]])
    #expect(batches.flatMap(\.commands) == commands)
    #expect(Batch.cut([], author: alice).isEmpty)
}
