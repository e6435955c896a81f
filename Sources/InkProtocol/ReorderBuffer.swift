/// Releases items that reach this peer by an unordered, duplicating path (an IM server, a
/// bridge) strictly in order per origin, keyed by `(origin, sequence)`.
///
/// Sans IO like the ARQ session: `insert` and `handleTimeout` take `now`; released items and
/// gap reports come out of `pollEvent`; `pollTimeout` says when a gap report is next due.
/// When a gap stays open for `gapTimeout`, a `.missing` event names the ranges to request
/// again (repeated every `gapTimeout` until filled or skipped). Memory is bounded: per
/// origin, in total, in origins, and in how far ahead an item may be.
///
/// Deterministic: events for several origins come out in ascending origin order.
public struct ReorderBuffer<Origin: Hashable & Comparable & Sendable, Item> {
    public struct Configuration: Sendable {
        /// Items held for one origin behind a gap; more are refused (`.full`).
        public var maxBufferedPerOrigin = 1024
        /// Items held over all origins.
        public var maxBufferedTotal = 16_384
        /// Origins tracked at once; a new one beyond this is refused (`.full`).
        public var maxOrigins = 4096
        /// Largest distance ahead of the next expected number an item may be.
        public var maxAhead: UInt64 = 4096
        /// How long a gap may stay open before it is reported, and between reports.
        public var gapTimeout = Instant.Duration.milliseconds(500)
        /// Most ranges one `.missing` event names (the lowest ones).
        public var maxRangesPerReport = 16
        /// The number expected first from an origin not introduced with `expect`.
        public var firstSequence: UInt64 = 0
        public init() {}
    }

    public enum InsertResult: Equatable, Sendable {
        /// In order: this item and `count - 1` held ones behind it are now released.
        case released(count: Int)
        /// Ahead of a gap; held.
        case buffered
        /// Already released or already held; dropped.
        case duplicate
        /// Beyond `maxAhead`; dropped.
        case tooFarAhead
        /// A memory bound is reached; dropped (the sender's path will offer it again).
        case full
    }

    public enum Event {
        case released(origin: Origin, sequence: UInt64, item: Item)
        /// Ranges still missing for `origin` after `gapTimeout`: request them again.
        case missing(origin: Origin, ranges: [ClosedRange<UInt64>])
    }

    public struct Metrics: Equatable, Sendable {
        public var inserted = 0
        public var released = 0
        public var duplicates = 0
        public var refused = 0
        /// Items that arrived ahead of the next expected one.
        public var outOfOrder = 0
        /// Largest `sequence - next` seen on arrival.
        public var maxDepth: UInt64 = 0
        /// Out-of-order arrivals by depth: 1, 2-3, 4-7, ..., the last bucket holds >= 2^7.
        public var depthHistogram = [Int](repeating: 0, count: 8)
        public var gapReports = 0
        /// Items held now, over all origins.
        public var buffered = 0
        public init() {}
    }

    private struct OriginState {
        var next: UInt64
        /// Held items, ascending by sequence.
        var held: [(sequence: UInt64, item: Item)] = []
        /// When the current gap was first seen, or last reported.
        var gapClock: Instant?
    }

    public let configuration: Configuration
    private var origins: [Origin: OriginState] = [:]
    private var events: [Event] = []
    private var eventHead = 0
    public private(set) var metrics = Metrics()

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// The next number expected from `origin`.
    public func nextExpected(from origin: Origin) -> UInt64 {
        origins[origin]?.next ?? configuration.firstSequence
    }

    /// Starts (or moves forward) the cursor of `origin`, e.g. from a sync checkpoint; held
    /// items before it are dropped and those now in order are released.
    public mutating func expect(_ origin: Origin, next: UInt64) {
        guard var state = stateFor(origin) else { return }
        if next > state.next { advance(&state, origin: origin, to: next) }
        origins[origin] = state
    }

    /// Gives up on everything of `origin` up to and including `sequence` (e.g. known to be
    /// lost for good) and releases what follows in order.
    public mutating func skip(_ origin: Origin, through sequence: UInt64) {
        expect(origin, next: sequence &+ 1)
    }

    /// Forgets `origin` and everything held for it.
    public mutating func forget(_ origin: Origin) {
        if let s = origins.removeValue(forKey: origin) { metrics.buffered -= s.held.count }
    }

    @discardableResult
    public mutating func insert(_ item: Item, origin: Origin, sequence: UInt64, now: Instant) -> InsertResult {
        metrics.inserted += 1
        guard var state = stateFor(origin) else {
            metrics.refused += 1
            return .full
        }
        defer { origins[origin] = state }
        if sequence < state.next {
            metrics.duplicates += 1
            return .duplicate
        }
        if sequence == state.next {
            events.append(.released(origin: origin, sequence: sequence, item: item))
            metrics.released += 1
            state.next += 1
            let before = state.held.count
            releaseInOrder(&state, origin: origin)
            let count = 1 + before - state.held.count
            state.gapClock = state.held.isEmpty ? nil : now
            return .released(count: count)
        }
        let depth = sequence - state.next
        guard depth <= configuration.maxAhead else {
            metrics.refused += 1
            return .tooFarAhead
        }
        let position = insertionPoint(state.held, sequence)
        if position < state.held.count && state.held[position].sequence == sequence {
            metrics.duplicates += 1
            return .duplicate
        }
        guard state.held.count < configuration.maxBufferedPerOrigin, metrics.buffered < configuration.maxBufferedTotal else {
            metrics.refused += 1
            return .full
        }
        state.held.insert((sequence, item), at: position)
        metrics.buffered += 1
        metrics.outOfOrder += 1
        metrics.maxDepth = max(metrics.maxDepth, depth)
        var bucket = 0
        while bucket < 7 && depth >> UInt64(bucket + 1) != 0 { bucket += 1 }
        metrics.depthHistogram[bucket] += 1
        if state.gapClock == nil { state.gapClock = now }
        return .buffered
    }

    public mutating func pollEvent() -> Event? {
        guard eventHead < events.count else { return nil }
        let e = events[eventHead]
        eventHead += 1
        if eventHead == events.count {
            events.removeAll(keepingCapacity: true)
            eventHead = 0
        }
        return e
    }

    /// When the earliest open gap is due to be reported.
    public func pollTimeout() -> Instant? {
        var earliest: Instant?
        for state in origins.values {
            guard let c = state.gapClock else { continue }
            let due = c + configuration.gapTimeout
            earliest = earliest.map { min($0, due) } ?? due
        }
        return earliest
    }

    /// Reports every gap open for `gapTimeout`, in ascending origin order.
    public mutating func handleTimeout(now: Instant) {
        let due = origins.compactMap { (origin, state) -> Origin? in
            guard let c = state.gapClock, !(now < c + configuration.gapTimeout) else { return nil }
            return origin
        }.sorted()
        for origin in due {
            guard var state = origins[origin] else { continue }
            events.append(.missing(origin: origin, ranges: missingRanges(state)))
            metrics.gapReports += 1
            state.gapClock = now
            origins[origin] = state
        }
    }

    /// The numbers missing before the highest held item of `origin`, lowest first.
    public func missing(from origin: Origin) -> [ClosedRange<UInt64>] {
        origins[origin].map(missingRanges) ?? []
    }

    // MARK: Internals

    private mutating func stateFor(_ origin: Origin) -> OriginState? {
        if let s = origins[origin] { return s }
        guard origins.count < configuration.maxOrigins else { return nil }
        return OriginState(next: configuration.firstSequence)
    }

    private mutating func advance(_ state: inout OriginState, origin: Origin, to next: UInt64) {
        var dropped = 0
        while dropped < state.held.count && state.held[dropped].sequence < next { dropped += 1 }
        state.held.removeFirst(dropped)
        metrics.buffered -= dropped
        state.next = next
        releaseInOrder(&state, origin: origin)
        if state.held.isEmpty { state.gapClock = nil }
    }

    private mutating func releaseInOrder(_ state: inout OriginState, origin: Origin) {
        var n = 0
        while n < state.held.count && state.held[n].sequence == state.next {
            events.append(.released(origin: origin, sequence: state.next, item: state.held[n].item))
            metrics.released += 1
            state.next += 1
            n += 1
        }
        state.held.removeFirst(n)
        metrics.buffered -= n
    }

    private func insertionPoint(_ held: [(sequence: UInt64, item: Item)], _ sequence: UInt64) -> Int {
        var lo = 0, hi = held.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if held[mid].sequence < sequence { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private func missingRanges(_ state: OriginState) -> [ClosedRange<UInt64>] {
        var ranges: [ClosedRange<UInt64>] = []
        var expected = state.next
        for h in state.held where ranges.count < configuration.maxRangesPerReport {
            if h.sequence > expected { ranges.append(expected...(h.sequence - 1)) }
            expected = h.sequence + 1
        }
        return ranges
    }
}
