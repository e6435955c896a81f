/// Sequence numbers received above a moving base (the cumulative ack point), as sorted,
/// disjoint, non-adjacent runs: exactly what a selective acknowledgement reports.
///
/// Every number kept lies within 2^31 after the base, so ordering by distance from the base is
/// wrap-around safe.
public struct AckRangeSet: Equatable, Sendable {
    /// Ascending by distance from the base.
    public private(set) var ranges: [SequenceRange] = []

    public init() {}

    public var isEmpty: Bool { ranges.isEmpty }

    public func contains(_ s: SequenceNumber) -> Bool { ranges.contains { $0.contains(s) } }

    /// Adds `s` (which must be after `base`); returns false if it was already present.
    @discardableResult
    public mutating func insert(_ s: SequenceNumber, base: SequenceNumber) -> Bool {
        let d = base.distance(to: s)
        var i = 0
        while i < ranges.count && base.distance(to: ranges[i].end) < d { i += 1 }
        // Now ranges[i] (if any) ends at or after s.
        if i < ranges.count {
            if ranges[i].contains(s) { return false }
            if ranges[i].end == s {
                ranges[i].count += 1
                if i + 1 < ranges.count && ranges[i + 1].start == ranges[i].end {
                    ranges[i].count += ranges[i + 1].count
                    ranges.remove(at: i + 1)
                }
                return true
            }
            if s.advanced(by: 1) == ranges[i].start {
                ranges[i].start = s
                ranges[i].count += 1
                return true
            }
        }
        ranges.insert(SequenceRange(start: s, count: 1), at: i)
        return true
    }

    /// Forgets every number before `base` (the cumulative point moved up to it).
    public mutating func removeBelow(_ base: SequenceNumber) {
        while let first = ranges.first {
            if base.distance(to: first.start) >= 0 { return }
            if base.distance(to: first.end) <= 0 {
                ranges.removeFirst()
            } else {
                ranges[0] = SequenceRange(start: base, count: UInt32(base.distance(to: first.end)))
                return
            }
        }
    }
}
