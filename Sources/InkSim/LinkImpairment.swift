import InkProtocol

/// The fate of one datagram crossing an impaired direction.
public enum ImpairmentDecision: Sendable, Equatable {
    /// Lost to the loss model.
    case lost
    /// Larger than the configuration's `maximumDatagramSize`.
    case oversize
    /// Delivered at `due`; `duplicateDue` is set when a second copy also arrives. `reordered`
    /// means the datagram was held back by `reorderDelay` so later ones may overtake it.
    case deliver(due: Instant, duplicateDue: Instant?, reordered: Bool)
}

/// The decisions of one impaired direction, for a real proxy (`inkwire-bench link`) rather than
/// the simulator's in-memory wire. Sans-IO: the caller passes each datagram's size and arrival
/// time and gets back when (and whether) to forward it; holding and sending is the caller's job.
///
/// Replayable: every datagram consumes the same number of random draws whatever the outcome, so
/// the random part of decision k (lost or not, jitter, reordered, duplicated) is a pure function
/// of the seed and k. Only the bandwidth term depends on arrival times.
///
/// Draw order per datagram: loss (one draw for Bernoulli, two for Gilbert-Elliott: state step
/// then loss), jitter, reorder, duplicate, duplicate's jitter. `keepsOrder` and `queueCapacity`
/// of the configuration are not used here (the caller bounds its own queue).
public struct LinkImpairment: Sendable {
    public let configuration: LinkConfiguration
    private var random: SimRandom
    private var inBadState = false
    /// When the simulated bottleneck finishes serialising the previous datagram.
    private var busyUntil = Instant.zero
    /// Datagrams decided so far (the index of the next one).
    public private(set) var decided: UInt64 = 0

    public init(configuration: LinkConfiguration, seed: UInt64) {
        self.configuration = configuration
        self.random = SimRandom(seed: seed)
    }

    /// Decides the next datagram, `size` bytes arriving at `now`.
    public mutating func decide(size: Int, now: Instant) -> ImpairmentDecision {
        decided += 1
        let lost = drawLoss()
        let jitter = drawJitter()
        let reordered = random.chance(configuration.reorderChance)
        let duplicated = random.chance(configuration.duplicateChance)
        let duplicateJitter = drawJitter()
        if size > configuration.maximumDatagramSize { return .oversize }
        if lost { return .lost }
        var departure = now
        if let rate = configuration.bytesPerSecond, rate > 0 {
            let start = max(now, busyUntil)
            departure = start + .init(microseconds: UInt64(size) * 1_000_000 / rate)
            busyUntil = departure
        }
        let base = departure + configuration.delay
        let due = reordered ? base + jitter + configuration.reorderDelay : base + jitter
        return .deliver(due: due, duplicateDue: duplicated ? base + duplicateJitter : nil, reordered: reordered)
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

    private mutating func drawJitter() -> Instant.Duration {
        .init(microseconds: random.below(configuration.jitter.microseconds + 1))
    }
}
