import Testing
@testable import InkCodec

/// One receiver coded two ways: through the shared encoder, and alone as the reference.
private struct Receiver {
    var shared = BinaryCodecState()
    var alone = BinaryCodecState()
}

/// Codes `batch` for `receiver` both ways; the bytes (or the failure) must be the same.
private func deliver(_ batch: Batch, to receiver: inout Receiver, _ encoder: inout SharedBatchEncoder, seed: UInt64, step: Int) {
    let shared = try? encoder.encode(batch, state: &receiver.shared)
    let alone = try? BinaryBatchCodec.encode(batch, state: &receiver.alone)
    #expect(shared == alone, "seed \(seed) step \(step): shared bytes differ from the receiver's own encoding")
    #expect(receiver.shared.lastAuthor == receiver.alone.lastAuthor, "seed \(seed) step \(step)")
    #expect(receiver.shared.context(of: batch.author) == receiver.alone.context(of: batch.author), "seed \(seed) step \(step)")
}

@Test func sharedEncodingsAreEveryReceiversOwnBytes() {
    for seed in propertySeeds() {
        var rng = SeededRandom(seed: seed ^ 0x5eed)
        var batches = RandomBatches(seed: seed)
        var receivers = [Receiver](repeating: Receiver(), count: 8)
        var encoder = SharedBatchEncoder()
        var deliveries = 0
        var codings = 0
        for step in 0..<600 {
            let batch = batches.batch()
            for r in receivers.indices {
                switch Int.random(in: 0..<40, using: &rng) {
                case 0:
                    // A new member in this seat: fresh state on both sides.
                    receivers[r] = Receiver()
                case 1...5:
                    continue  // missed this batch (its own, or behind)
                default:
                    break
                }
                deliver(batch, to: &receivers[r], &encoder, seed: seed, step: step)
                deliveries += 1
            }
            codings += encoder.codings
        }
        // Receivers in step share: far fewer codings than deliveries.
        #expect(codings * 2 < deliveries, "seed \(seed): \(codings) codings for \(deliveries) deliveries")
    }
}

@Test func receiversInTheSameStateShareOneArray() throws {
    var batches = RandomBatches(seed: 7)
    var a = BinaryCodecState()
    var b = BinaryCodecState()
    var encoder = SharedBatchEncoder()
    var previous: Batch?
    for _ in 0..<50 {
        let batch = batches.batch()
        defer { previous = batch }
        guard let x = try? encoder.encode(batch, state: &a) else { continue }
        let y = try encoder.encode(batch, state: &b)
        #expect(x == y)
        // An equal batch (two empty ones in a row) keeps the codings it had: they are its own.
        #expect(encoder.codings == 1 || batch == previous)
        #expect(x.withUnsafeBufferPointer { $0.baseAddress } == y.withUnsafeBufferPointer { $0.baseAddress })
    }
}

@Test func aReceiverThatMissedABatchGetsItsOwnCoding() throws {
    let author = AuthorID(3)
    func point(_ t: UInt64, _ phase: StrokePhase, _ x: Int32) -> TimedCommand {
        TimedCommand(timeMs: t, command: .point(StrokePoint(stroke: StrokeID(1), phase: phase, x: x, y: x)))
    }
    let first = Batch(author: author, commands: [point(0, .start, 10), point(17, .move, 20)])
    let second = Batch(author: author, commands: [point(33, .move, 30), point(50, .move, 40)])
    var inStep = BinaryCodecState()
    var late = BinaryCodecState()
    var encoder = SharedBatchEncoder()
    _ = try encoder.encode(first, state: &inStep)
    let x = try encoder.encode(second, state: &inStep)
    let y = try encoder.encode(second, state: &late)
    #expect(encoder.codings == 2)
    var reference = BinaryCodecState()
    #expect(y == (try BinaryBatchCodec.encode(second, state: &reference)))
    #expect(x != y)
}

/// Past `maxAuthors` the author table empties: the shared path commits through the same
/// table, so receivers evict exactly as they would alone.
@Test func authorTableEvictionIsTheSameShared() {
    let authors = BinaryCodecState.maxAuthors + 40
    var receivers = [Receiver](repeating: Receiver(), count: 3)
    var encoder = SharedBatchEncoder()
    for round in 0..<2 {
        for a in 0..<authors {
            let batch = Batch(author: AuthorID(UInt32(a)), commands: [
                TimedCommand(timeMs: UInt64(round * 100 + 17), command: .point(StrokePoint(stroke: StrokeID(UInt32(round + 1)), phase: .start, x: Int32(a), y: 5))),
            ])
            for r in receivers.indices where !(r == 2 && a % 7 == 0) {
                deliver(batch, to: &receivers[r], &encoder, seed: 0, step: round * authors + a)
            }
        }
    }
}
