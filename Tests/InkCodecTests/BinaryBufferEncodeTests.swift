import Testing
@testable import InkCodec

// The raw-buffer encode entry point: the same bytes and state changes as the [UInt8] one, and
// no change at all when the bytes do not fit.

@Test(arguments: [UInt64(11), 12, 13])
func bufferEncodeMatchesArrayEncode(seed: UInt64) throws {
    var gen = RandomBatches(seed: seed)
    var arrayEncoder = BinaryBatchEncoder()
    var bufferEncoder = BinaryBatchEncoder()
    var arrayState = BinaryCodecState()
    var bufferState = BinaryCodecState()
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 8)
    defer { buffer.deallocate() }
    for i in 0..<300 {
        let batch = gen.batch()
        let selfContained = i % 7 == 0
        var expected: [UInt8] = []
        try arrayEncoder.encode(batch, state: &arrayState, selfContained: selfContained, into: &expected)
        let n = try bufferEncoder.encode(batch, state: &bufferState, selfContained: selfContained, into: buffer)
        #expect(Array(buffer.prefix(n)) == expected, "seed \(seed) batch \(i)")
        #expect(bufferState.context(of: batch.author) == arrayState.context(of: batch.author), "seed \(seed) batch \(i)")
        #expect(bufferState.lastAuthor == arrayState.lastAuthor)
    }
}

@Test func bufferEncodeTooSmallChangesNothing() throws {
    let author = AuthorID(3)
    let batch = Batch(author: author, commands: [
        TimedCommand(timeMs: 1000, command: .point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .start, x: 400_000, y: 500_000))),
        TimedCommand(timeMs: 1017, command: .point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .move, x: 401_234, y: 498_765))),
        TimedCommand(timeMs: 1033, command: .point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .end, x: 402_468, y: 497_530))),
    ])
    var reference = BinaryCodecState()
    let expected = try BinaryBatchCodec.encode(batch, state: &reference)
    #expect(expected.count <= BinaryBatchCodec.maxEncodedBytes(commands: batch.commands.count))

    var encoder = BinaryBatchEncoder()
    var state = BinaryCodecState()
    let small = UnsafeMutableRawBufferPointer.allocate(byteCount: expected.count - 1, alignment: 1)
    defer { small.deallocate() }
    small.initializeMemory(as: UInt8.self, repeating: 0xAA)
    #expect(throws: BinaryCodecError.batchTooLarge) {
        _ = try encoder.encode(batch, state: &state, into: small)
    }
    #expect(small.allSatisfy { $0 == 0xAA })
    #expect(state.lastAuthor == nil)

    // The same encoder then fits the batch into a buffer of the exact size.
    let exact = UnsafeMutableRawBufferPointer.allocate(byteCount: expected.count, alignment: 1)
    defer { exact.deallocate() }
    let n = try encoder.encode(batch, state: &state, into: exact)
    #expect(n == expected.count && Array(exact) == expected)
    #expect(state.context(of: author) == reference.context(of: author))
}
