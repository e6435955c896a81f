/// The receive buffer of an ARQ session: segments from `next` (the cumulative point) up to
/// `capacity` ahead, in a ring, released strictly in sequence order.
struct ReceiveWindow {
    enum Outcome: Equatable {
        /// Stored; `gap` when it is not the next expected one.
        case stored(gap: Bool)
        case duplicate
        case outsideWindow
    }

    let capacity: Int
    private var slots: [(payload: [UInt8], end: Bool)?]
    private var ringHead = 0
    private(set) var next: SequenceNumber
    /// Numbers held above `next`, for selective acknowledgements.
    private(set) var outOfOrder = AckRangeSet()
    /// Payload bytes held in the ring.
    private(set) var bufferedBytes = 0

    init(capacity: Int, next: SequenceNumber) {
        self.capacity = max(1, capacity)
        self.slots = Array(repeating: nil, count: max(1, capacity))
        self.next = next
    }

    /// Stores `segment` if it lies within `window` (<= capacity) numbers from `next`.
    mutating func store(_ segment: Segment, window: Int) -> Outcome {
        let d = next.distance(to: segment.sequence)
        if d < 0 { return .duplicate }
        guard Int(d) < min(window, capacity) else { return .outsideWindow }
        let slot = (ringHead + Int(d)) % capacity
        if slots[slot] != nil { return .duplicate }
        slots[slot] = (segment.payload, segment.endOfMessage)
        bufferedBytes += segment.payload.count
        if d > 0 { outOfOrder.insert(segment.sequence, base: next) }
        return .stored(gap: d > 0)
    }

    /// Takes the segment at `next`, if it has arrived, and moves `next` on.
    mutating func popInOrder() -> (payload: [UInt8], end: Bool)? {
        guard let s = slots[ringHead] else { return nil }
        slots[ringHead] = nil
        ringHead = (ringHead + 1) % capacity
        next = next.advanced(by: 1)
        bufferedBytes -= s.payload.count
        outOfOrder.removeBelow(next)
        return s
    }
}
