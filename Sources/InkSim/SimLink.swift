import InkProtocol

/// Counters of one direction of a wire. `sentDatagrams`/`sentBytes` count every datagram the
/// endpoint handed over, dropped ones included.
public struct LinkStats: Sendable, Equatable {
    public var sentDatagrams = 0
    public var sentBytes = 0
    public var lost = 0
    public var partitioned = 0
    public var queueDropped = 0
    public var oversize = 0
    public var duplicated = 0
    public var delivered = 0
    public var deliveredBytes = 0
    /// Largest number of datagrams in flight at once.
    public var maxInFlight = 0
    public init() {}
}

/// One direction of a simulated wire: loss, delay, jitter, reordering, duplication, bandwidth
/// and a bounded queue. Datagrams leave in (due time, send order) order, so ties never depend
/// on anything but the seed.
struct SimLink {
    struct InFlight {
        var due: Instant
        var serial: UInt64
        var datagram: [UInt8]
        func precedes(_ other: InFlight) -> Bool { due < other.due || (due == other.due && serial < other.serial) }
    }

    enum Outcome: UInt64 { case queued = 1, lost, queueFull, oversize, partitioned }

    var configuration: LinkConfiguration
    var random: SimRandom
    var stats = LinkStats()
    private var inBadState = false
    private var heap: [InFlight] = []
    private var nextSerial: UInt64 = 0
    private var busyUntil = Instant.zero
    private var latestDue = Instant.zero

    init(configuration: LinkConfiguration, random: SimRandom) {
        self.configuration = configuration
        self.random = random
    }

    var inFlight: Int { heap.count }
    var nextDue: Instant? { heap.first?.due }

    /// Takes a datagram at `now`; returns what happened to it (its duplicate, if any, is queued too).
    mutating func send(_ datagram: [UInt8], now: Instant) -> Outcome {
        stats.sentDatagrams += 1
        stats.sentBytes += datagram.count
        if datagram.count > configuration.maximumDatagramSize {
            stats.oversize += 1
            return .oversize
        }
        if drawLoss() {
            stats.lost += 1
            return .lost
        }
        let outcome = enqueue(datagram, now: now)
        if outcome == .queued, configuration.duplicateChance > 0, random.chance(configuration.duplicateChance) {
            if enqueue(datagram, now: now) == .queued { stats.duplicated += 1 }
        }
        return outcome
    }

    /// Counts a datagram the network refused before it reached the link (a partition).
    mutating func countPartitioned(_ datagram: [UInt8]) {
        stats.sentDatagrams += 1
        stats.sentBytes += datagram.count
        stats.partitioned += 1
    }

    /// The next datagram due at or before `now`.
    mutating func popDue(now: Instant) -> [UInt8]? {
        guard let first = heap.first, first.due <= now else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
        return first.datagram
    }

    private mutating func drawLoss() -> Bool {
        switch configuration.loss {
        case .none:
            return false
        case .bernoulli(let p):
            return random.chance(p)
        case .gilbertElliott(let ge):
            inBadState = random.chance(inBadState ? 1 - ge.badToGood : ge.goodToBad)
            return random.chance(inBadState ? ge.lossWhenBad : ge.lossWhenGood)
        }
    }

    private mutating func enqueue(_ datagram: [UInt8], now: Instant) -> Outcome {
        guard heap.count < configuration.queueCapacity else {
            stats.queueDropped += 1
            return .queueFull
        }
        var departure = now
        if let rate = configuration.bytesPerSecond, rate > 0 {
            let start = max(now, busyUntil)
            departure = start + .init(microseconds: UInt64(datagram.count) * 1_000_000 / rate)
            busyUntil = departure
        }
        var due = departure + configuration.delay
        if configuration.jitter.microseconds > 0 {
            due = due + .init(microseconds: random.below(configuration.jitter.microseconds + 1))
        }
        if configuration.reorderChance > 0, random.chance(configuration.reorderChance) {
            due = due + configuration.reorderDelay
        }
        if configuration.keepsOrder { due = max(due, latestDue) }
        latestDue = max(latestDue, due)
        heap.append(InFlight(due: due, serial: nextSerial, datagram: datagram))
        nextSerial += 1
        siftUp(heap.count - 1)
        stats.maxInFlight = max(stats.maxInFlight, heap.count)
        return .queued
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, heap[left + 1].precedes(heap[left]) { smallest = left + 1 }
            guard heap[smallest].precedes(heap[parent]) else { return }
            heap.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
