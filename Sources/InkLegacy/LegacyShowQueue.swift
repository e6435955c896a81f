// The strokes a session may still have to show its app, taken in the board's drawing order.
import InkCodec

/// A set of strokes, each with its place in the board's drawing order, from which the first in
/// that order is taken in O(log n): a late joiner's board of n strokes is written in O(n log n),
/// not by scanning every stroke left for each one written.
struct LegacyShowQueue {
    /// Each member's order; heap entries with another order (or none) are stale.
    private var members: [StrokeRef: UInt64] = [:]
    /// A binary min-heap of (order, stroke).
    private var heap: [(order: UInt64, ref: StrokeRef)] = []

    var isEmpty: Bool { members.isEmpty }
    var count: Int { members.count }

    mutating func insert(_ ref: StrokeRef, order: UInt64) {
        guard members[ref] != order else { return }
        members[ref] = order
        push((order, ref))
        if heap.count > 2 * members.count + 64 { rebuild() }  // stale entries stay bounded
    }

    mutating func remove(_ ref: StrokeRef) { members[ref] = nil }

    func contains(_ ref: StrokeRef) -> Bool { members[ref] != nil }

    /// Gives every member its order again (the drawing order was renumbered).
    mutating func reorder(_ order: (StrokeRef) -> UInt64) {
        for ref in Array(members.keys) { members[ref] = order(ref) }
        rebuild()
    }

    /// The first member in order for which `decide` says `.take`; members it says `.drop` for
    /// leave the set, `.keep` ones stay (looked at again next time).
    enum Decision { case take, drop, keep }

    mutating func first(where decide: (StrokeRef) -> Decision) -> StrokeRef? {
        var kept: [(order: UInt64, ref: StrokeRef)] = []
        defer { for entry in kept { push(entry) } }
        while let top = heap.first {
            popTop()
            guard members[top.ref] == top.order else { continue }  // stale
            switch decide(top.ref) {
            case .take: kept.append(top); return top.ref
            case .drop: members[top.ref] = nil
            case .keep: kept.append(top)
            }
        }
        return nil
    }

    private mutating func rebuild() {
        heap = members.map { (order: $0.value, ref: $0.key) }
        heap.sort { Self.less($0, $1) }  // a sorted array is a heap
    }

    private static func less(_ a: (order: UInt64, ref: StrokeRef), _ b: (order: UInt64, ref: StrokeRef)) -> Bool {
        a.order != b.order ? a.order < b.order : a.ref < b.ref
    }

    private mutating func push(_ entry: (order: UInt64, ref: StrokeRef)) {
        heap.append(entry)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.less(heap[i], heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func popTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && Self.less(heap[l], heap[m]) { m = l }
            if r < heap.count && Self.less(heap[r], heap[m]) { m = r }
            if m == i { return }
            heap.swapAt(i, m)
            i = m
        }
    }
}
