import InkCodec

/// The checked batches of one room, so that most watchers verify a `roomBatch` by comparing
/// bytes instead of decoding it.
///
/// Decoding is a function of the payload bytes and the codec state alone. Every watcher of a
/// room starts from a fresh `BinaryCodecState` and decodes the room's batches in `roomSeq`
/// order, so a watcher that has only ever taken recorded payloads holds exactly the state the
/// reference chain reached ("in step"). For each `roomSeq` the first in-step watcher decodes in
/// full, checks the commands against what the drawer sent, and records the payload and the
/// state after it; an in-step watcher that then gets the same bytes would decode them from the
/// same state to the same (checked) commands and the same state, so it takes that state and
/// counts the batch. Any other case (other bytes, an entry no longer held, an error) decodes
/// in full as before and leaves the watcher out of step for good. Entries are written once per
/// `roomSeq` and never replaced by an older one, so the chain of states is unique.
final class FanoutBatchReference {
    /// Recent batches held (watchers of a room trail each other by far less than this).
    static let depth = 64

    enum Lookup {
        /// The recorded bytes: the codec state after them.
        case match(BinaryCodecState)
        /// Recorded with other bytes, or no longer held.
        case unusable
        /// Not recorded yet: the watcher decodes and records it.
        case unrecorded
    }

    private var roomSeqs = [UInt64](repeating: 0, count: FanoutBatchReference.depth)
    private var payloads = [[UInt8]](repeating: [], count: FanoutBatchReference.depth)
    private var states = [BinaryCodecState](repeating: BinaryCodecState(), count: FanoutBatchReference.depth)

    func find(roomSeq: UInt64, payload: [UInt8]) -> Lookup {
        let slot = Int(roomSeq % UInt64(FanoutBatchReference.depth))
        let held = roomSeqs[slot]
        if held < roomSeq { return .unrecorded }
        guard held == roomSeq, payloads[slot] == payload else { return .unusable }
        return .match(states[slot])
    }

    /// Records `roomSeq` (found `.unrecorded`), decoded from the chain's state and checked.
    func record(roomSeq: UInt64, payload: [UInt8], after state: BinaryCodecState) {
        let slot = Int(roomSeq % UInt64(FanoutBatchReference.depth))
        guard roomSeqs[slot] < roomSeq else { return }
        roomSeqs[slot] = roomSeq
        payloads[slot] = payload
        states[slot] = state
    }
}
