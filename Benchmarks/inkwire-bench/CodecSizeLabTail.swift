// codec-size-lab: what each live batch loses to whole bytes, read from the real encoded batches.
import Foundation
import InkCodec

/// Per batch: N bytes holding I bits of information. rANS (protocol.md 2.2) codes the ops from
/// x = 1, so I = 8 (N - 4) + log2(final state) when bytes were emitted (N > 4), else log2 of the
/// batch read as one big-endian number. Compared rules, in bits summed over all batches:
/// - `codec`: 8 N - I, what the codec spends above the information;
/// - `whole_bytes`: 8 ceil(I / 8) - I, any code whose length follows from its content alone;
/// - `shortest_tail`: the expected 8 n - I when the coder may end on the shortest byte string
///   inside its final interval and the decoder pads the rest (an arithmetic coder's tail; the
///   interval's position taken as uniformly random): n >= k with probability min(1, 2^(8k - I)).
struct LabTail {
    var batches = 0
    var codecBits = 0.0
    var wholeByteBits = 0.0
    var shortestTailBits = 0.0

    init(_ batches: [Batch]) throws {
        var encoder = BinaryBatchEncoder()
        var state = BinaryCodecState()
        for batch in batches {
            var bytes: [UInt8] = []
            try encoder.encode(batch, state: &state, into: &bytes)
            let n = bytes.count
            let stateBytes = bytes.prefix(4).reduce(0.0) { $0 * 256 + Double($1) }
            let info = 8 * Double(max(n - 4, 0)) + log2(stateBytes)
            self.batches += 1
            codecBits += 8 * Double(n) - info
            wholeByteBits += 8 * (info / 8).rounded(.up) - info
            var expected = 0.0
            var k = 0
            while Double(8 * k) < info + 8 {
                expected += 8 * (1 - min(1, pow(2, Double(8 * k) - info)))
                k += 1
            }
            shortestTailBits += expected - info
        }
    }
}
