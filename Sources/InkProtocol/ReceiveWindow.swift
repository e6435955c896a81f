/// The receive buffer of an ARQ session: segments from `next` (the cumulative point) up to
/// `capacity` ahead, in a ring, released strictly in sequence order.
///
/// The ring starts at `initialSlots` and doubles (up to `capacity`) only when a segment lands
/// beyond it, so the many sessions that only ever see sparse live strokes stay small while a
/// bulk history transfer gets the whole window.
struct ReceiveWindow {
    /// Slots allocated before any segment needs more.
    static let initialSlots = 64

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
        self.slots = Array(repeating: nil, count: min(max(1, capacity), ReceiveWindow.initialSlots))
        self.next = next
    }

    /// Stores `segment` if it lies within `window` (<= capacity) numbers from `next`.
    mutating func store(_ segment: Segment, window: Int) -> Outcome {
        let d = next.distance(to: segment.sequence)
        if d < 0 { return .duplicate }
        guard Int(d) < min(window, capacity) else { return .outsideWindow }
        if Int(d) >= slots.count { grow(toHold: Int(d) + 1) }
        let slot = (ringHead + Int(d)) % slots.count
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
        ringHead = (ringHead + 1) % slots.count
        next = next.advanced(by: 1)
        bufferedBytes -= s.payload.count
        outOfOrder.removeBelow(next)
        return s
    }

    /// Re-lays the ring from `next` into at least `count` slots (doubling, at most `capacity`).
    private mutating func grow(toHold count: Int) {
        var size = slots.count
        while size < count { size *= 2 }
        size = min(size, capacity)
        var grown: [(payload: [UInt8], end: Bool)?] = Array(repeating: nil, count: size)
        for i in 0..<slots.count { grown[i] = slots[(ringHead + i) % slots.count] }
        slots = grown
        ringHead = 0
    }
}
