// One batch coded once for the many receivers whose codec states agree on it (a relay's fan-out).

/// Encodes one batch for many receivers, each with its own `BinaryCodecState`, coding it once
/// per distinct starting point instead of once per receiver.
///
/// A batch's bytes (not `selfContained`) depend on exactly two things of the receiver's state:
/// whether its last author is the batch's author (the header), and its context for that author
/// (everything after the header). The state after depends on that context alone. So a
/// receiver agreeing with an earlier one on both takes that encoding's bytes (the same array
/// storage) and commits that encoding's context after: bytes and state end exactly as
/// `BinaryBatchCodec.encode(batch, state: &state)` would leave them.
///
/// Holds the encodings of one batch; a call with another batch forgets them. A room's members
/// that received every batch of an author in order agree on it, so a live fan-out codes each
/// batch about once; a member that joined late codes its own until its context converges (a
/// new stroke's points replace everything a context remembers).
public struct SharedBatchEncoder {
    /// Distinct starting points remembered per batch; receivers in yet another state code
    /// their own (correct, just not shared).
    public static let maxEncodings = 4

    private struct Encoding {
        var sameAuthor: Bool
        var before: StrokeContext
        var after: StrokeContext
        var bytes: [UInt8]
    }

    private var batch: Batch?
    private var encodings: [Encoding] = []

    public init() {}

    /// How many codings the current batch took (0 before any batch).
    public var codings: Int { encodings.count }

    /// The bytes and state change of `BinaryBatchCodec.encode(batch, state: &state)`, shared
    /// with earlier receivers of the same batch in the same state. On error `state` is
    /// unchanged.
    public mutating func encode(_ batch: Batch, state: inout BinaryCodecState) throws(BinaryCodecError) -> [UInt8] {
        // Equal batches with the same command storage compare in constant time (a tail entry).
        if self.batch != batch {
            self.batch = batch
            encodings.removeAll(keepingCapacity: true)
        }
        let sameAuthor = state.lastAuthor == batch.author
        let before = state.context(of: batch.author)
        for e in encodings where e.sameAuthor == sameAuthor && e.before.codesLike(before) {
            state.commit(e.after, author: batch.author)
            return e.bytes
        }
        let bytes = try BinaryBatchCodec.encode(batch, state: &state)
        if encodings.count < SharedBatchEncoder.maxEncodings {
            encodings.append(Encoding(sameAuthor: sameAuthor, before: before, after: state.context(of: batch.author), bytes: bytes))
        }
        return bytes
    }
}

extension StrokeContext {
    /// Equal in every field the encoder reads, the derived frame included (`==` leaves it out).
    func codesLike(_ other: StrokeContext) -> Bool {
        self == other && frame == other.frame
    }
}
