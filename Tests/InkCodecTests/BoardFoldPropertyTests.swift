import Testing
@testable import InkCodec

/// Random multi-author commands, as a room log.
private func randomRoomLog(_ rng: inout SeededRandom, authors: [AuthorID], count: Int) -> [(AuthorID, Command)] {
    var open: [AuthorID: StrokeID] = [:]
    var next: [AuthorID: UInt32] = [:]
    var drawn: [AuthorID: [StrokeID]] = [:]
    var log: [(AuthorID, Command)] = []
    func coordinate() -> Int32 { Int32.random(in: -100_000...1_100_000, using: &rng) }
    for _ in 0..<count {
        let a = authors.randomElement(using: &rng)!
        let roll = Int.random(in: 0..<100, using: &rng)
        if let s = open[a] {
            let end = roll < 20
            log.append((a, .point(StrokePoint(stroke: s, tool: .pen, phase: end ? .end : .move, x: coordinate(), y: coordinate()))))
            if end { open[a] = nil }
            continue
        }
        switch roll {
        case 0..<50:
            let s = StrokeID(next[a, default: 1])
            next[a, default: 1] += 1
            drawn[a, default: []].append(s)
            open[a] = s
            let tool: Tool = Int.random(in: 0..<8, using: &rng) == 0 ? .eraser : .pen
            log.append((a, .point(StrokePoint(stroke: s, tool: tool, phase: .start, x: coordinate(), y: coordinate()))))
        case 50..<60:
            log.append((a, .penStyle(PenStyle(color: UInt8.random(in: 0...5, using: &rng), width: UInt8.random(in: 1...3, using: &rng))!)))
        case 60..<72:
            log.append((a, .undo(drawn[a]?.randomElement(using: &rng) ?? StrokeID(0))))
        case 72..<82:
            log.append((a, .redo(drawn[a]?.randomElement(using: &rng) ?? StrokeID(0))))
        case 82..<85:
            log.append((a, .clear))
        case 85..<88:
            if let other = authors.randomElement(using: &rng), let s = drawn[other]?.randomElement(using: &rng) {
                log.append((a, .erase(StrokeRef(author: other, stroke: s))))
            }
        case 88..<90:
            log.append((a, .addPage(PageID(1))))
        case 90..<92:
            log.append((a, .switchPage(PageID(UInt32.random(in: 0...1, using: &rng)))))
        case 92..<93:
            log.append((a, .room(.presentPage(PageID(UInt32.random(in: 0...1, using: &rng))))))
        case 93..<95:
            log.append((a, .unknown(kind: CommandKind(rawValue: 200), payload: [1, 2])))
        default:
            log.append((a, .room(Bool.random(using: &rng) ? .lock : .unlock)))
        }
    }
    for (a, s) in open.sorted(by: { $0.key < $1.key }) {
        log.append((a, .point(StrokePoint(stroke: s, tool: .pen, phase: .end, x: 0, y: 0))))
    }
    return log
}

/// Random multi-author logs fold deterministically, keep the board's invariants, and fold the
/// same whatever the batching.
@Test func boardFoldIsDeterministicAndConsistent() {
    let authors = [AuthorID(1), AuthorID(2)]
    for seed in propertySeeds() {
        var rng = SeededRandom(seed: seed)
        let log = randomRoomLog(&rng, authors: authors, count: 3000)
        var a = Board()
        for (author, c) in log { a.apply(c, author: author) }
        var b = Board()
        var i = 0
        while i < log.count {  // same log as batches of consecutive same-author runs
            var j = i
            while j < log.count && log[j].0 == log[i].0 && j - i < 7 { j += 1 }
            b.apply(Batch(author: log[i].0, commands: log[i..<j].map { TimedCommand(timeMs: UInt64(i), command: $0.1) }))
            i = j
        }
        #expect(a.digest == b.digest, "seed \(seed)")
        for author in authors {
            let state = a.author(author)
            for s in state.undoStack { #expect(a.stroke(StrokeRef(author: author, stroke: s))?.isVisible == true, "seed \(seed)") }
            for s in state.redoStack { #expect(a.stroke(StrokeRef(author: author, stroke: s))?.isVisible == false, "seed \(seed)") }
            #expect(Set(state.undoStack).isDisjoint(with: state.redoStack), "seed \(seed)")
        }
    }
}
