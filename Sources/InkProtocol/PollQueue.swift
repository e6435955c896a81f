/// A first-in, first-out queue of what a sans-IO session hands out through its `poll...`
/// functions: appended while handling input, drained one element per poll. It is an array and a
/// read index, emptied (keeping its storage) once everything has been polled, so popping is O(1)
/// and a session that is polled to the end never grows.
public struct PollQueue<Element> {
    private var elements: [Element] = []
    private var head = 0

    public init() {}

    public var isEmpty: Bool { head == elements.count }
    public var count: Int { elements.count - head }
    public var first: Element? { head < elements.count ? elements[head] : nil }

    public mutating func append(_ element: Element) { elements.append(element) }

    public mutating func popFirst() -> Element? {
        guard head < elements.count else { return nil }
        let element = elements[head]
        head += 1
        if head == elements.count {
            elements.removeAll(keepingCapacity: true)
            head = 0
        }
        return element
    }
}

extension PollQueue: Sendable where Element: Sendable {}
