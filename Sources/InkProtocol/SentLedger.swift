/// One segment this end has sent and the peer has not yet cumulatively acknowledged.
struct SentSegment {
    var payload: [UInt8]
    var endOfMessage: Bool
    var acked = false
    /// Declared lost (or probed) and waiting to be sent again.
    var needsRetransmit = false
    var lastSentAt: Instant
    /// Local number of the last datagram that carried this segment (loss detection).
    var lastSentDatagram: UInt64
    /// Proactive copies sent along in later datagrams (bounded by the redundancy policy).
    var redundantCopies = 0
}

/// The send buffer: segments from the oldest unacknowledged sequence number (`base`) up to
/// `next`, contiguous, so a segment's position is its distance from `base`.
struct SentLedger {
    private var entries: [SentSegment] = []
    private var head = 0
    private(set) var base: SequenceNumber

    init(base: SequenceNumber) { self.base = base }

    var count: Int { entries.count - head }
    var isEmpty: Bool { head == entries.count }
    var next: SequenceNumber { base.advanced(by: UInt32(count)) }

    /// Read and changed in place: a get/set pair copied the segment out and back for every
    /// field the send and ack paths touch (a count up and down on its payload each time).
    subscript(offset: Int) -> SentSegment {
        _read { yield entries[head + offset] }
        _modify { yield &entries[head + offset] }
    }

    mutating func append(_ segment: SentSegment) { entries.append(segment) }

    /// Position of `s`, or nil if it is not in the ledger.
    func offset(of s: SequenceNumber) -> Int? {
        let d = base.distance(to: s)
        return d >= 0 && Int(d) < count ? Int(d) : nil
    }

    /// Drops acknowledged segments from the front; returns how many.
    @discardableResult
    mutating func popAcked() -> Int {
        var n = 0
        while head < entries.count && entries[head].acked {
            head += 1
            n += 1
        }
        base = base.advanced(by: UInt32(n))
        if head > 64 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        return n
    }
}
