import InkProtocol

/// How one direction of a simulated wire treats datagrams. Every probability is per datagram.
public struct LinkConfiguration: Sendable, Equatable {
    /// Which datagrams vanish.
    public var loss: LossModel = .none
    /// Fixed one-way delay.
    public var delay: Instant.Duration = .milliseconds(20)
    /// Extra delay drawn uniformly from 0 ... `jitter` for each datagram.
    public var jitter: Instant.Duration = .zero
    /// When true, a datagram never overtakes an earlier one: jitter becomes head-of-line delay.
    public var keepsOrder: Bool = false
    /// Chance that a datagram is held back by `reorderDelay` more, so later ones overtake it.
    public var reorderChance: Double = 0
    public var reorderDelay: Instant.Duration = .milliseconds(50)
    /// Chance that a datagram arrives twice (the copy draws its own delay).
    public var duplicateChance: Double = 0
    /// Serialisation rate of the bottleneck, or nil for unlimited.
    public var bytesPerSecond: UInt64? = nil
    /// Datagrams the direction holds in flight before it tail-drops.
    public var queueCapacity: Int = LinkConfiguration.defaultQueueCapacity
    /// Larger datagrams are dropped, like a path MTU (IPv4 UDP payload on Ethernet).
    public var maximumDatagramSize: Int = LinkConfiguration.defaultMaximumDatagramSize

    /// Default in-flight bound of one direction.
    public static let defaultQueueCapacity = 1000
    /// 1500-byte Ethernet MTU minus IPv4 and UDP headers.
    public static let defaultMaximumDatagramSize = 1472

    public init() {}

    /// A loss-free wire with a fixed delay.
    public static func clean(delay: Instant.Duration = .milliseconds(20)) -> LinkConfiguration {
        var c = LinkConfiguration()
        c.delay = delay
        return c
    }
}

/// Which datagrams a direction loses.
public enum LossModel: Sendable, Equatable {
    case none
    /// Each datagram is lost independently with this probability.
    case bernoulli(Double)
    /// A two-state Markov chain (bursty loss), stepped once per datagram.
    case gilbertElliott(GilbertElliott)
}

/// Gilbert-Elliott burst loss: a good and a bad state with their own loss probabilities.
public struct GilbertElliott: Sendable, Equatable {
    public var goodToBad: Double
    public var badToGood: Double
    public var lossWhenGood: Double
    public var lossWhenBad: Double

    public init(goodToBad: Double, badToGood: Double, lossWhenGood: Double = 0, lossWhenBad: Double = 1) {
        self.goodToBad = goodToBad
        self.badToGood = badToGood
        self.lossWhenGood = lossWhenGood
        self.lossWhenBad = lossWhenBad
    }

    /// Long-run loss probability: the stationary share of each state times its loss.
    public var meanLoss: Double {
        let total = goodToBad + badToGood
        guard total > 0 else { return lossWhenGood }
        return (badToGood * lossWhenGood + goodToBad * lossWhenBad) / total
    }
}
