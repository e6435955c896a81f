import Testing
@testable import InkCodec

// The command-buffer decode entry point: the same commands and state changes as the
// [TimedCommand] one, and no change at all when the commands do not fit.

@Test(arguments: [UInt64(21), 22, 23])
func bufferDecodeMatchesArrayDecode(seed: UInt64) throws {
    var gen = RandomBatches(seed: seed)
    var encodeState = BinaryCodecState()
    var arrayState = BinaryCodecState()
    var bufferState = BinaryCodecState()
    let buffer = UnsafeMutableBufferPointer<TimedCommand>.allocate(capacity: Batch.maxCommands)
    defer { buffer.deallocate() }
    for i in 0..<300 {
        let batch = gen.batch()
        let bytes = try BinaryBatchCodec.encode(batch, state: &encodeState, selfContained: i % 7 == 0)
        var expected: [TimedCommand] = []
        let arrayAuthor = try bytes.withUnsafeBytes { raw throws(BinaryCodecError) in
            try BinaryBatchDecoder.decode(raw, state: &arrayState, into: &expected)
        }
        let (author, count) = try decodeIntoBuffer(bytes, &bufferState, buffer).get()
        #expect(author == arrayAuthor && author == batch.author, "seed \(seed) batch \(i)")
        #expect(Array(buffer.prefix(count)) == expected && expected == batch.commands, "seed \(seed) batch \(i)")
        buffer.baseAddress!.deinitialize(count: count)
        #expect(bufferState.context(of: author) == arrayState.context(of: author), "seed \(seed) batch \(i)")
        #expect(bufferState.lastAuthor == arrayState.lastAuthor)
    }
}

@Test func bufferDecodeTooSmallChangesNothing() throws {
    let author = AuthorID(3)
    // A start, an opaque command (a payload the buffer must release on error), then moves one
    // 60 Hz frame apart: from the third on they take the decoder's run of moves.
    var commands: [TimedCommand] = [
        TimedCommand(timeMs: BinaryPrediction.gridTime(60), command: .point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .start, x: 400_000, y: 500_000))),
        TimedCommand(timeMs: BinaryPrediction.gridTime(61), command: .unknown(kind: CommandKind(rawValue: 200), payload: [1, 2, 3])),
    ]
    for i in 1...6 {
        commands.append(TimedCommand(
            timeMs: BinaryPrediction.gridTime(61 + UInt64(i)),
            command: .point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .move, x: 400_000 + Int32(i) * 997, y: 500_000 - Int32(i) * 1013))))
    }
    var encodeState = BinaryCodecState()
    let bytes = try BinaryBatchCodec.encode(Batch(author: author, commands: commands), state: &encodeState)
    let buffer = UnsafeMutableBufferPointer<TimedCommand>.allocate(capacity: commands.count)
    defer { buffer.deallocate() }
    var state = BinaryCodecState()
    for capacity in 0..<commands.count {
        let result = decodeIntoBuffer(bytes, &state, UnsafeMutableBufferPointer(rebasing: buffer[..<capacity]))
        #expect(throws: BinaryCodecError.tooManyCommands) { try result.get() }
        #expect(state.lastAuthor == nil, "capacity \(capacity)")
    }
    // An exact fit decodes.
    let (decodedAuthor, count) = try decodeIntoBuffer(bytes, &state, buffer).get()
    #expect(decodedAuthor == author && count == commands.count)
    #expect(Array(buffer.prefix(count)) == commands)
    buffer.baseAddress!.deinitialize(count: count)
    #expect(state.context(of: author) == encodeState.context(of: author))
}

/// The buffer entry point on an array's bytes, its outcome as a value.
private func decodeIntoBuffer(
    _ bytes: [UInt8], _ state: inout BinaryCodecState, _ buffer: UnsafeMutableBufferPointer<TimedCommand>
) -> Result<(AuthorID, Int), BinaryCodecError> {
    bytes.withUnsafeBytes { raw in
        do throws(BinaryCodecError) {
            let (author, count) = try BinaryBatchDecoder.decode(raw, state: &state, into: buffer)
            return .success((author, count))
        } catch {
            return .failure(error)
        }
    }
}
