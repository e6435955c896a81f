import Testing
@testable import InkCodec

private let teacher = AuthorID(7)

/// legacy text -> model -> legacy text over the whole lesson, byte for byte.
@Test func lessonRoundTripsThroughTheModelByteForByte() throws {
    guard let text = lessonTrace() else { return }
    let lines = try Trace.parse(text)
    #expect(lines.count == 27_812)
    var translator = LegacyTranslator(author: teacher)
    let commands = lines.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }
    let back = commands.map { TraceLine(timeMs: $0.timeMs, message: LegacyMessage(transcribing: $0.command)!) }
    #expect(back == lines)
    let printed = Trace.format(back)
    #expect(printed.count == text.count)
    #expect(printed == text)

    // The model's view of the lesson matches the trace's summary.
    let points = commands.filter { if case .point = $0.command { true } else { false } }
    #expect(points.count == 27_744)
    let starts = Set(commands.compactMap { if case .point(let p) = $0.command { p.stroke } else { nil } })
    #expect(starts.count == 2_480)
    var board = Board()
    for batch in Batch.cut(commands, author: teacher) { board.apply(batch) }
    var again = Board()
    for c in commands { again.apply(c.command, author: teacher) }
    #expect(board.digest == again.digest)
}

/// The lesson read as model commands and written back as the author's messages is unchanged
/// (undo and redo name the author's own last lines, which is what its messages mean).
@Test func lessonTranscribesBackUnchanged() throws {
    guard let text = lessonTrace() else { return }
    let lines = try Trace.parse(text)
    var from = LegacyTranslator(author: teacher)
    let back = lines.map { LegacyMessage(transcribing: from.command(from: $0.message)) }
    #expect(back == lines.map(\.message))
}

/// Every frame of the lesson (with heartbeats between), fed one byte at a time (a split at
/// every position), in one piece, and in seeded random chunks.
@Test func lessonFramesDecodeAtEverySplitPoint() throws {
    guard let text = lessonTrace() else { return }
    let lines = try Trace.parse(text)
    var frames: [LegacyFrame] = []
    for (i, line) in lines.enumerated() {
        if i % 50 == 0 { frames.append(.heartbeat) }
        frames.append(.text(line.message))
    }
    let stream = frames.flatMap(\.bytes)
    #expect(stream.count == 749_736 + 2 * ((lines.count + 49) / 50))

    func decode(chunkSizes next: () -> Int) throws -> [LegacyFrame] {
        var decoder = LegacyFrameDecoder()
        var out: [LegacyFrame] = []
        out.reserveCapacity(frames.count)
        var i = 0
        while i < stream.count {
            let n = min(stream.count - i, next())
            try decoder.handleBytes(stream[i..<(i + n)])
            while let frame = try decoder.pollFrame() { out.append(frame) }
            i += n
        }
        #expect(decoder.bufferedByteCount == 0)
        return out
    }
    #expect(try decode { 1 } == frames)
    #expect(try decode { 64 * 1024 } == frames)  // typical TCP reads
    var rng = SeededRandom(seed: 42)
    #expect(try decode { Int.random(in: 0...100, using: &rng) } == frames, "seed 42")
    // Payloads are the trace's commands exactly.
    let payloads = frames.compactMap { if case .data(_, let p) = $0 { p } else { nil } }
    #expect(payloads.map { try! LegacyMessage(parsing: $0) } == lines.map(\.message))
}

@Test func traceLinesParseAndPrint() throws {
    let text = Array("967,1,0.087480,0.048543,1\n1017,3,5,2\n\n1017,4\n".utf8)
    let lines = try Trace.parse(text)
    #expect(lines == [
        TraceLine(timeMs: 967, message: .point(tool: .pen, x: 87_480, y: 48_543, phase: .start)),
        TraceLine(timeMs: 1017, message: .penStyle(PenStyle(color: 5, width: 2)!)),
        TraceLine(timeMs: 1017, message: .undo),
    ])
    #expect(Trace.format(lines) == Array("967,1,0.087480,0.048543,1\n1017,3,5,2\n1017,4\n".utf8))
    #expect(try Trace.parse(Array("5,6".utf8)) == [TraceLine(timeMs: 5, message: .clear)])
}

@Test(arguments: [
    ("10,4\n9,4\n", TraceError(line: 2, reason: .timeWentBack)),
    ("4\n", TraceError(line: 1, reason: .badTime)),
    (",4\n", TraceError(line: 1, reason: .badTime)),
    ("-1,4\n", TraceError(line: 1, reason: .badTime)),
    ("1234567890123456,4\n", TraceError(line: 1, reason: .badTime)),
    ("1,4\n2,9\n", TraceError(line: 2, reason: .message(.unknownCode(9)))),
    ("1,1,0.5,0.5\n", TraceError(line: 1, reason: .message(.fieldCount(code: 1, found: 3, expected: 4)))),
    ("1,4\r\n", TraceError(line: 1, reason: .message(.notANumber(field: 0)))),
    ("1," + String(repeating: "0", count: 100) + "\n", TraceError(line: 1, reason: .lineTooLong)),
])
func badTracesGiveTheLineAndReason(text: String, error: TraceError) {
    #expect(throws: error) { try Trace.parse(Array(text.utf8)) }
}

@Test func randomTracesRoundTripThroughTheModel() throws {
    for seed in propertySeeds() {
        var rng = SeededRandom(seed: seed)
        var time: UInt64 = 0
        let lines: [TraceLine] = (0..<3000).map { _ in
            time += UInt64.random(in: 0...400, using: &rng)
            return TraceLine(timeMs: time, message: randomMessage(&rng))
        }
        let text = Trace.format(lines)
        var translator = LegacyTranslator(author: AuthorID(UInt32.random(in: 0...9, using: &rng)))
        let back = try Trace.parse(text).map { line in
            TraceLine(timeMs: line.timeMs, message: LegacyMessage(transcribing: translator.command(from: line.message))!)
        }
        #expect(Trace.format(back) == text, "seed \(seed)")
    }
}
