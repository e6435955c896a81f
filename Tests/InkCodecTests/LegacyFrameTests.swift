import Testing
@testable import InkCodec

private func decodeAll(_ chunks: [[UInt8]]) throws -> [LegacyFrame] {
    var decoder = LegacyFrameDecoder()
    var frames: [LegacyFrame] = []
    for chunk in chunks {
        try decoder.handleBytes(chunk)
        while let frame = try decoder.pollFrame() { frames.append(frame) }
    }
    return frames
}

private let sample: [LegacyFrame] = [
    .heartbeat,
    .text(.point(tool: .pen, x: 266_667, y: 331_675, phase: .start)),
    .data(command: 101, payload: []),
    .heartbeat,
    .data(command: 11, payload: Array(repeating: 0xab, count: 1024)),
    .text(.undo),
    .data(command: 0, payload: [0x27, 0x11]),
    .heartbeat,
]

@Test func encodesHeaderBigEndian() {
    #expect(LegacyFrame.heartbeat.bytes == [0x27, 0x11])
    #expect(LegacyFrame.text(.undo).bytes == [0x00, 0x65, 0, 0, 0, 1, 0x34])
    #expect(LegacyFrame.data(command: 0x1234, payload: []).bytes == [0x12, 0x34, 0, 0, 0, 0])
}

@Test func decodesAtEverySplitOfASampleStream() throws {
    let stream = sample.flatMap(\.bytes)
    for cut in 0...stream.count {
        #expect(try decodeAll([Array(stream[..<cut]), Array(stream[cut...])]) == sample, "cut \(cut)")
    }
    for a in stride(from: 0, through: 40, by: 1) {
        for b in a...min(a + 40, stream.count) {
            let chunks = [Array(stream[..<a]), Array(stream[a..<b]), Array(stream[b...])]
            #expect(try decodeAll(chunks) == sample, "cuts \(a) \(b)")
        }
    }
    #expect(try decodeAll(stream.map { [$0] }) == sample)
}

@Test func aFrameFollowedByExactlyOneByteKeepsThatByteOnce() throws {
    // The app's own receiver stores the extra byte twice here and desynchronises.
    var decoder = LegacyFrameDecoder()
    let first = LegacyFrame.text(.redo).bytes
    let second = LegacyFrame.text(.clear).bytes
    try decoder.handleBytes(first + [second[0]])
    #expect(try decoder.pollFrame() == .text(.redo))
    #expect(try decoder.pollFrame() == nil)
    #expect(decoder.bufferedByteCount == 1)
    try decoder.handleBytes(second.dropFirst())
    #expect(try decoder.pollFrame() == .text(.clear))
    #expect(try decoder.pollFrame() == nil)
}

@Test func aZeroLengthFrameComesOutWithoutWaitingForMoreBytes() throws {
    var decoder = LegacyFrameDecoder()
    try decoder.handleBytes([0x00, 0x65, 0, 0, 0, 0])
    #expect(try decoder.pollFrame() == .data(command: 101, payload: []))
    #expect(try decoder.pollFrame() == nil)
    #expect(decoder.bufferedByteCount == 0)
}

@Test func anOversizeFrameIsATypedStickyError() throws {
    var decoder = LegacyFrameDecoder()
    let length = UInt32(LegacyFrame.maxPayloadBytes + 1)
    try decoder.handleBytes([0x00, 0x65, UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)])
    let error = LegacyFrameError.frameTooLarge(command: 101, length: length)
    #expect(throws: error) { try decoder.pollFrame() }
    #expect(throws: error) { try decoder.pollFrame() }
    #expect(throws: error) { try decoder.handleBytes([0x27, 0x11]) }
    // The largest allowed frame passes.
    var ok = LegacyFrameDecoder()
    let big = LegacyFrame.data(command: 11, payload: Array(repeating: 7, count: LegacyFrame.maxPayloadBytes))
    try ok.handleBytes(big.bytes)
    #expect(try ok.pollFrame() == big)
}

@Test func unpolledInputIsBounded() throws {
    var decoder = LegacyFrameDecoder()
    let chunk = [UInt8](repeating: 0x27, count: 64 * 1024)
    var thrown: LegacyFrameError?
    for _ in 0..<100 {
        do { try decoder.handleBytes(chunk) } catch { thrown = error; break }
    }
    #expect(thrown == .bufferOverflow(buffered: 6 * 64 * 1024))
}

@Test func randomChunkingOfRandomFrames() throws {
    for seed in propertySeeds() {
        var rng = SeededRandom(seed: seed)
        var frames: [LegacyFrame] = []
        for _ in 0..<300 {
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: frames.append(.heartbeat)
            case 1: frames.append(.data(command: UInt16.random(in: 0...0xffff, using: &rng) == 10001 ? 1 : 7, payload: []))
            case 2: frames.append(.text(randomMessage(&rng)))
            default:
                let n = Int.random(in: 0...2000, using: &rng)
                frames.append(.data(command: 11, payload: (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }))
            }
        }
        let stream = frames.flatMap(\.bytes)
        var chunks: [[UInt8]] = []
        var i = 0
        while i < stream.count {
            let n = min(stream.count - i, Int.random(in: 0...700, using: &rng))
            chunks.append(Array(stream[i..<(i + n)]))
            i += n
        }
        #expect(try decodeAll(chunks) == frames, "seed \(seed)")
    }
}
