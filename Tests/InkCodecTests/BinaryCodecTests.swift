import Testing
@testable import InkCodec

/// Random batches of several authors round-trip exactly, and both ends keep the same state.
@Test(arguments: propertySeeds()) func randomBatchesRoundTrip(seed: UInt64) throws {
    var gen = RandomBatches(seed: seed)
    var sender = BinaryCodecState()
    var receiver = BinaryCodecState()
    for i in 0..<1500 {
        let batch = gen.batch()
        let selfContained = i % 97 == 13
        let bytes = try BinaryBatchCodec.encode(batch, state: &sender, selfContained: selfContained)
        #expect(BinaryBatchCodec.isSelfContained(bytes) == selfContained)
        let back = try BinaryBatchCodec.decode(bytes, state: &receiver)
        #expect(back == batch, "seed \(seed) batch \(i)")
        #expect(receiver.lastAuthor == sender.lastAuthor, "seed \(seed) batch \(i)")
        for a in [1, 2, 3, UInt32.max] {
            #expect(receiver.context(of: AuthorID(a)) == sender.context(of: AuthorID(a)), "seed \(seed) batch \(i)")
        }
        if back != batch { return }
    }
}

/// Every strict prefix of a batch, and the batch with a byte appended, never traps: it is
/// rejected with a typed error (state unchanged) or, since the codec has no checksum of its own
/// (frames carry CRC32C), decodes to a different batch: the encoding is canonical, so no other
/// bytes decode to the original.
@Test(arguments: propertySeeds()) func truncatedAndExtendedBatchesNeverDecodeToTheOriginal(seed: UInt64) throws {
    var gen = RandomBatches(seed: seed)
    var sender = BinaryCodecState()
    var receiver = BinaryCodecState()
    var rejected = 0
    var damaged = 0
    for i in 0..<300 {
        let batch = gen.batch()
        let bytes = try BinaryBatchCodec.encode(batch, state: &sender)
        // Every cut in the last 24 bytes (where the coder's final state lives) and 8 others.
        let cuts = Set((max(0, bytes.count - 24)..<bytes.count).map { $0 } + (0..<8).map { _ in Int.random(in: 0..<bytes.count, using: &gen.rng) }).sorted()
        for variant in cuts.map({ Array(bytes[0..<$0]) }) + [bytes + [UInt8(i & 0xFF)]] {
            damaged += 1
            var copy = receiver
            do {
                let other = try BinaryBatchCodec.decode(variant, state: &copy)
                #expect(other != batch || copy.lastAuthor != sender.lastAuthor, "seed \(seed) batch \(i) \(hex(variant))")
            } catch {
                rejected += 1
                #expect(copy.lastAuthor == receiver.lastAuthor && copy.context(of: batch.author) == receiver.context(of: batch.author))
            }
        }
        #expect(try BinaryBatchCodec.decode(bytes, state: &receiver) == batch, "seed \(seed) batch \(i)")
    }
    #expect(rejected * 2 > damaged, "seed \(seed): most damage is caught")
}

/// Random bytes never trap; what decodes re-encodes to the same bytes (one canonical form).
@Test(arguments: propertySeeds()) func garbageNeverTraps(seed: UInt64) throws {
    var rng = SeededRandom(seed: seed)
    var accepted = 0
    for _ in 0..<20_000 {
        let n = Int.random(in: 1...40, using: &rng)
        let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
        var state = BinaryCodecState()
        if Bool.random(using: &rng) {
            _ = try BinaryBatchCodec.encode(Batch(author: AuthorID(1), commands: []), state: &state)
        }
        var sender = state
        guard let batch = try? BinaryBatchCodec.decode(bytes, state: &state) else { continue }
        accepted += 1
        let selfContained = BinaryBatchCodec.isSelfContained(bytes)
        #expect(try BinaryBatchCodec.encode(batch, state: &sender, selfContained: selfContained) == bytes, "seed \(seed) input \(hex(bytes))")
    }
    #expect(accepted < 20_000)
}

/// Hand-built bytes reach each decoder error exactly.
@Test func malformedBatchesGiveTypedErrors() throws {
    func coded(_ build: (RANSEncoder) -> Void) -> [UInt8] {
        let e = RANSEncoder()
        build(e)
        var out: [UInt8] = []
        e.finish(into: &out)
        return out
    }
    func decodeFresh(_ bytes: [UInt8]) -> BinaryCodecError? {
        var state = BinaryCodecState()
        do { _ = try BinaryBatchCodec.decode(bytes, state: &state) } catch { return error }
        return nil
    }
    #expect(decodeFresh([]) == .badLength(0))
    #expect(decodeFresh([0x00]) == .badState)
    #expect(decodeFresh([0x00, 0xFF, 0xFF, 0xFF, 0x00]) == .badState)
    #expect(decodeFresh(coded { $0.put(3, .header) }) == .unsupportedHeader(3))
    #expect(decodeFresh(coded { $0.put(0, .header) }) == .missingContext)
    let authored: (RANSEncoder) -> Void = { $0.put(1, .header); $0.putUInt(9) }
    #expect(decodeFresh(coded { authored($0) }) == nil)
    #expect(decodeFresh(coded { authored($0); $0.put(16, .kind(0)) }) == .reservedKind(16))
    // Kind 0 (slot 0 of every kind table) is never a command: the batch ends where its bytes do.
    #expect(decodeFresh(coded { authored($0); $0.put(0, .kind(0)) }) == .reservedKind(0))
    // A move while no stroke is open.
    #expect(decodeFresh(coded {
        authored($0); $0.put(BinaryKind.move, .kind(0)); $0.put(3, .time(0))
    }) == .badField)
    #expect(decodeFresh(coded { authored($0); $0.put(BinaryKind.clear, .kind(0)); $0.put(26, .time(3)) }) == .badTime)
    // Pen colour 7.
    #expect(decodeFresh(coded {
        authored($0); $0.put(BinaryKind.penStyle, .kind(0)); $0.put(0, .time(3)); $0.putBits(7, 3); $0.putBits(1, 2)
    }) == .badField)
    // An author id above UInt32.
    #expect(decodeFresh(coded { $0.put(1, .header); $0.putUInt(1 << 32) }) == .badField)
    // A coordinate outside Int32: residual 2^31 from the pen position 0.
    #expect(decodeFresh(coded {
        authored($0); $0.put(BinaryKind.startPen, .kind(0)); $0.put(0, .time(2))
        let (sx, ex, bx) = BinaryPrediction.residualSymbol(1 << 31)
        $0.put(sx, .residual(0)); $0.put(0, .residual(1)); $0.put(Int(ex & 1), .sign(0)); $0.putWideBits(ex >> 1, bx - 1)
    }) == .coordinateOutOfRange)
    // An opaque payload longer than the input could carry, and one above the bound.
    #expect(decodeFresh(coded {
        authored($0); $0.put(BinaryKind.opaque, .kind(0)); $0.put(0, .time(3)); $0.putBits(200, 8); $0.putUInt(50)
    }) == .payloadTooLarge(50))
    #expect(decodeFresh(coded {
        authored($0); $0.put(BinaryKind.opaque, .kind(0)); $0.put(0, .time(3)); $0.putBits(200, 8); $0.putUInt(1 << 20)
    }) == .payloadTooLarge(1 << 20))
    // More commands than Batch.maxCommands (cheap clears from nothing).
    #expect(decodeFresh(coded {
        authored($0)
        for _ in 0...Batch.maxCommands { $0.put(BinaryKind.clear, .kind(0)); $0.put(0, .time(3)) }
    }) == .tooManyCommands)
    // A state with a leading zero byte, or a 4-byte state below the bound before more bytes:
    // not the canonical form.
    let good = coded { authored($0) }
    #expect(decodeFresh([0] + good) == .badState)
    #expect(decodeFresh([0, 0x7F, 0xFF, 0xFF, 0x00]) == .badState)
    // Naming the previous batch's author again, or a generic point where a move would do.
    var state = BinaryCodecState()
    _ = try BinaryBatchCodec.decode(good, state: &state)
    #expect(throws: BinaryCodecError.badField) { try BinaryBatchCodec.decode(good, state: &state) }
}

@Test func encoderBoundsGiveTypedErrorsAndKeepTheState() throws {
    var state = BinaryCodecState()
    _ = try BinaryBatchCodec.encode(Batch(author: AuthorID(1), commands: [TimedCommand(timeMs: 17, command: .clear)]), state: &state)
    let before = state.context(of: AuthorID(1))
    let many = Batch(author: AuthorID(1), commands: Array(repeating: TimedCommand(timeMs: 0, command: .clear), count: Batch.maxCommands + 1))
    #expect(throws: BinaryCodecError.tooManyCommands) { try BinaryBatchCodec.encode(many, state: &state) }
    let big = Batch(author: AuthorID(1), commands: [TimedCommand(timeMs: 0, command: .unknown(kind: CommandKind(rawValue: 99), payload: Array(repeating: 1, count: BinaryBatchCodec.maxOpaqueBytes + 1)))])
    #expect(throws: BinaryCodecError.payloadTooLarge(UInt64(BinaryBatchCodec.maxOpaqueBytes + 1))) { try BinaryBatchCodec.encode(big, state: &state) }
    #expect(state.context(of: AuthorID(1)) == before)
    #expect(state.lastAuthor == AuthorID(1))
}

/// A batch of an author beyond `maxAuthors` empties the table on both sides alike.
@Test func authorTableBoundIsSharedByBothEnds() throws {
    var sender = BinaryCodecState()
    var receiver = BinaryCodecState()
    for a in 0..<UInt32(2 * BinaryCodecState.maxAuthors) {
        let batch = Batch(author: AuthorID(a % 7 == 0 ? 1 : a), commands: [
            TimedCommand(timeMs: 1000 + UInt64(a), command: .point(StrokePoint(stroke: StrokeID(1), phase: .start, x: Int32(a), y: 5))),
        ])
        let bytes = try BinaryBatchCodec.encode(batch, state: &sender)
        #expect(try BinaryBatchCodec.decode(bytes, state: &receiver) == batch)
    }
    for a in 0..<UInt32(2 * BinaryCodecState.maxAuthors) {
        #expect(receiver.context(of: AuthorID(a)) == sender.context(of: AuthorID(a)))
    }
    #expect(sender.context(of: AuthorID(2)) == .initial)  // dropped when the table filled
}

@Test func streamFormRoundTripsAndRejectsDamage() throws {
    var gen = RandomBatches(seed: 5)
    let batches = (0..<50).map { _ in gen.batch() }
    let stream = try BinaryBatchStream.encode(batches)
    #expect(Array(stream.prefix(4)) == Array("IKB1".utf8))
    #expect(try BinaryBatchStream.decode(stream) == batches)
    #expect(throws: BinaryBatchStream.Error.badMagic) { try BinaryBatchStream.decode([0x49]) }
    #expect(throws: BinaryBatchStream.Error.truncated(offset: 4)) { try BinaryBatchStream.decode(Array(stream.prefix(6))) }
    #expect(throws: BinaryBatchStream.Error.badLength(offset: 4)) { try BinaryBatchStream.decode(BinaryBatchStream.magic + [0x00]) }
    #expect(throws: BinaryBatchStream.Error.badLength(offset: 4)) { try BinaryBatchStream.decode(BinaryBatchStream.magic + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]) }
}
