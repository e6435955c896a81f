import Testing
@testable import InkCodec

/// A small deterministic generator (the test must not depend on the system random source).
private struct LCG {
    var state: UInt64
    mutating func next(_ bound: Int) -> Int {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((state >> 33) % UInt64(bound))
    }
}

private func refold(_ board: Board, maxCommands: Int = 4096) -> Board {
    var copy = Board()
    for batch in board.snapshotBatches(maxCommandsPerBatch: maxCommands) { copy.apply(batch) }
    return copy
}

/// A random log over a few authors: strokes, undos/redos of random own strokes, pens, pages,
/// clears, erases, locks.
private func randomBoard(seed: UInt64, steps: Int, authors: UInt32, strokeIDs: UInt32) -> Board {
    var rng = LCG(state: seed)
    var board = Board()
    var open: [AuthorID: StrokeID] = [:]
    for _ in 0..<steps {
        let author = AuthorID(UInt32(rng.next(Int(authors))) + 1)
        switch rng.next(100) {
        case 0..<55:
            let id = open[author] ?? StrokeID(UInt32(rng.next(Int(strokeIDs))))
            let phase: StrokePhase = open[author] == nil ? .start : (rng.next(4) == 0 ? .end : .move)
            open[author] = phase == .end ? nil : id
            let tool: Tool = rng.next(8) == 0 ? .eraser : .pen
            board.apply(.point(StrokePoint(stroke: id, tool: tool, phase: phase, x: Int32(rng.next(2000)) - 500, y: Int32(rng.next(1000)))), author: author)
        case 55..<70: board.apply(.undo(StrokeID(UInt32(rng.next(Int(strokeIDs))))), author: author)
        case 70..<80:
            let redo = board.author(author).redoStack
            if let s = redo.isEmpty ? nil : redo[rng.next(redo.count)] { board.apply(.redo(s), author: author) }
        case 80..<86: board.apply(.penStyle(PenStyle(color: UInt8(rng.next(6)), width: UInt8(rng.next(3) + 1))!), author: author)
        case 86..<89: board.apply(.addPage(PageID(UInt32(rng.next(4)))), author: author)
        case 89..<92: board.apply(.switchPage(PageID(UInt32(rng.next(4)))), author: author)
        case 92..<93: board.apply(.clear, author: author)
        case 93..<96:
            board.apply(.erase(StrokeRef(author: AuthorID(UInt32(rng.next(Int(authors))) + 1), stroke: StrokeID(UInt32(rng.next(Int(strokeIDs)))))), author: author)
        case 96..<97: board.apply(.room(.presentPage(PageID(UInt32(rng.next(4))))), author: author)
        case 97..<98: board.apply(.room(rng.next(2) == 0 ? .lock : .unlock), author: author)
        default: board.apply(.unknown(kind: CommandKind(rawValue: 77), payload: [1]), author: author)
        }
    }
    return board
}

@Test func emptyBoardSnapshotIsEmpty() {
    #expect(Board().snapshotBatches().isEmpty)
    #expect(refold(Board()).digest == Board().digest)
}

@Test("random boards refold to the same digest", arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
func randomBoardsRefold(seed: UInt64) {
    let board = randomBoard(seed: seed, steps: 3000, authors: 4, strokeIDs: 60)
    #expect(board.strokeCount > 0, "seed \(seed)")
    #expect(refold(board).digest == board.digest, "seed \(seed)")
    #expect(refold(board, maxCommands: 7).digest == board.digest, "seed \(seed)")
}

@Test func snapshotDropsDeletedStrokesAndRedundantCommands() {
    var board = Board()
    let a = AuthorID(1)
    for i in 0..<50 as Range<UInt32> {
        board.apply(.point(StrokePoint(stroke: StrokeID(i), phase: .start, x: 1, y: 1)), author: a)
        board.apply(.point(StrokePoint(stroke: StrokeID(i), phase: .end, x: 2, y: 2)), author: a)
    }
    board.apply(.clear, author: a)
    board.apply(.point(StrokePoint(stroke: StrokeID(99), phase: .end, x: 3, y: 3)), author: a)
    let commands = board.snapshotBatches().flatMap(\.commands).map(\.command)
    #expect(commands == [.point(StrokePoint(stroke: StrokeID(99), phase: .end, x: 3, y: 3))])
    #expect(refold(board).digest == board.digest)
}

@Test func authorWithMoreStrokesThanTheUndoDepthKeepsExactStacks() {
    var board = Board()
    let a = AuthorID(3)
    let n = UInt32(Board.maxUndoDepth) + 300
    for i in 0..<n {
        board.apply(.point(StrokePoint(stroke: StrokeID(i), phase: .end, x: Int32(i), y: 0)), author: a)
        // Keep stroke 5 alive on the stack by undoing and redoing it now and then, and stroke 7
        // undone-then-redone once early (it falls off later).
        if i % 500 == 10 {
            board.apply(.undo(StrokeID(5)), author: a)
            board.apply(.redo(StrokeID(5)), author: a)
        }
        if i == 8 {
            board.apply(.undo(StrokeID(7)), author: a)
            board.apply(.redo(StrokeID(7)), author: a)
        }
    }
    board.apply(.undo(StrokeID(n - 1)), author: a)
    board.apply(.undo(StrokeID(5)), author: a)
    board.apply(.undo(StrokeID(n - 40)), author: a)
    board.apply(.redo(StrokeID(5)), author: a)
    #expect(board.author(a).undoStack.contains(StrokeID(5)))
    #expect(!board.author(a).undoStack.contains(StrokeID(7)))
    let copy = refold(board, maxCommands: 1000)
    #expect(copy.author(a) == board.author(a))
    #expect(copy.digest == board.digest)
}

@Test func manyAuthorsManyStrokesRefold() {
    let board = randomBoard(seed: 42, steps: 20_000, authors: 2, strokeIDs: 3000)
    #expect(refold(board).digest == board.digest)
}

@Test func strokesPushedOffByLaterDeletedStrokesStayOffTheStack() {
    var board = Board()
    let a = AuthorID(1)
    board.apply(.addPage(PageID(2)), author: a)
    for i in 0..<UInt32(Board.maxUndoDepth) {
        board.apply(.point(StrokePoint(stroke: StrokeID(i), phase: .end, x: 1, y: 1)), author: a)
    }
    board.apply(.switchPage(PageID(2)), author: a)
    for i in 5000..<5100 as Range<UInt32> {
        board.apply(.point(StrokePoint(stroke: StrokeID(i), phase: .end, x: 1, y: 1)), author: a)
    }
    board.apply(.clear, author: a)  // deletes the page-2 strokes; strokes 0..<100 stay off the stack
    #expect(board.author(a).undoStack.count == Board.maxUndoDepth - 100)
    let copy = refold(board)
    #expect(copy.author(a) == board.author(a))
    #expect(copy.strokeCount == board.strokeCount)
    #expect(copy.digest == board.digest)
}
