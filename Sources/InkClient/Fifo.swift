/// A first-in first-out array: `removeFirst` is O(1) amortized (the consumed prefix is dropped
/// in bulk), so queues of thousands of pending batches cost nothing per acknowledgement.
struct Fifo<Element> {
    /// Consumed slots kept before they are dropped in one move.
    static var compactionThreshold: Int { 1024 }

    private var items: [Element] = []
    private var start = 0

    var count: Int { items.count - start }
    var isEmpty: Bool { start == items.count }

    /// The element `index` places after the first.
    subscript(index: Int) -> Element {
        get { items[start + index] }
        set { items[start + index] = newValue }
    }

    mutating func append(_ element: Element) { items.append(element) }

    mutating func removeFirst(_ n: Int) {
        start += min(n, count)
        if start == items.count {
            items.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= Fifo.compactionThreshold && start * 2 >= items.count {
            items.removeSubrange(0..<start)
            start = 0
        }
    }

    /// Removes the element at `index` (rare: a refused batch).
    mutating func remove(at index: Int) { items.remove(at: start + index) }

    /// How many leading elements satisfy `predicate`.
    func prefixCount(while predicate: (Element) -> Bool) -> Int {
        var n = 0
        while start + n < items.count && predicate(items[start + n]) { n += 1 }
        return n
    }

    func firstIndex(where predicate: (Element) -> Bool) -> Int? {
        items[start...].firstIndex(where: predicate).map { $0 - start }
    }
}
