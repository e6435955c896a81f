/// What the chaos proxy does to PUBLISH packets (QoS 0 and 1; QoS 2 and every other packet
/// pass untouched and in order).
public struct MQTTChaosConfiguration: Sendable, Equatable {
    /// Longest delay or jitter accepted, µs (one minute).
    public static let maximumDelayMicroseconds: UInt64 = 60_000_000
    /// Longest burst accepted, in publishes.
    public static let maximumBurstLengthBound = 1024

    /// Every publish waits this long at least, µs.
    public var delayMicroseconds: UInt64 = 0
    /// Plus a uniform extra delay up to this, µs: a later publish with less jitter overtakes.
    public var jitterMicroseconds: UInt64 = 0
    /// Chance (0 ... 1) a publish is sent twice (QoS 1: the copy carries DUP), the copy with
    /// its own delay.
    public var duplicateChance: Double = 0
    /// Chance (0 ... 1) a publish starts a burst: it and the next publishes, up to
    /// `maximumBurstLength` in all, are held and released together when the last one arrives.
    public var burstChance: Double = 0
    public var maximumBurstLength = 8

    public init(delayMicroseconds: UInt64 = 0, jitterMicroseconds: UInt64 = 0, duplicateChance: Double = 0,
                burstChance: Double = 0, maximumBurstLength: Int = 8) {
        self.delayMicroseconds = min(delayMicroseconds, Self.maximumDelayMicroseconds)
        self.jitterMicroseconds = min(jitterMicroseconds, Self.maximumDelayMicroseconds)
        self.duplicateChance = min(max(duplicateChance, 0), 1)
        self.burstChance = min(max(burstChance, 0), 1)
        self.maximumBurstLength = min(max(maximumBurstLength, 2), Self.maximumBurstLengthBound)
    }

    /// No chaos: every publish passes at once.
    public var isQuiet: Bool { delayMicroseconds == 0 && jitterMicroseconds == 0 && duplicateChance == 0 && burstChance == 0 }
}

/// One publish's fate.
public struct MQTTChaosDecision: Sendable, Equatable {
    public enum Burst: Sendable, Equatable {
        /// Not in a burst: leaves after `delayMicroseconds` from its arrival.
        case none
        /// Held until the burst's last publish arrives, then `delayMicroseconds` more.
        case held
        /// The burst's last publish: it and every held one are released now.
        case releases
    }

    public var delayMicroseconds: UInt64
    /// The copy's delay (from the same start as the original's), nil when not duplicated.
    public var duplicateDelayMicroseconds: UInt64?
    public var burst: Burst

    public init(delayMicroseconds: UInt64, duplicateDelayMicroseconds: UInt64? = nil, burst: Burst = .none) {
        self.delayMicroseconds = delayMicroseconds
        self.duplicateDelayMicroseconds = duplicateDelayMicroseconds
        self.burst = burst
    }
}

/// The seeded decision stream for the publishes of one direction of one connection: the n-th
/// publish always gets the same decision for the same seed, whatever the timing.
public struct MQTTChaosModel: Sendable {
    public enum Direction: UInt64, Sendable {
        case clientToBroker = 1
        case brokerToClient = 2
    }

    public let configuration: MQTTChaosConfiguration
    private var random: MQTTChaosRandom
    /// Publishes still to come in the current burst (the last one releases).
    private var burstRemaining = 0

    public init(configuration: MQTTChaosConfiguration, seed: UInt64) {
        self.configuration = configuration
        random = MQTTChaosRandom(seed: seed)
    }

    /// The seed of one stream: the run's seed, the client identifier (so a client gets the same
    /// decisions whichever connection the proxy accepted first), which connection of that client
    /// (0 for its first), and the direction.
    public static func streamSeed(runSeed: UInt64, clientIdentifier: some Sequence<UInt8>, connectionOrdinal: Int,
                                  direction: Direction) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325  // FNV-1a
        for byte in clientIdentifier {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        var mixer = MQTTChaosRandom(seed: runSeed ^ hash)
        var mixed = mixer.next() ^ UInt64(truncatingIfNeeded: connectionOrdinal) &* 0xD6E8_FEB8_6659_FD93
        mixed ^= direction.rawValue &* 0xA076_1D64_78BD_642F
        var final = MQTTChaosRandom(seed: mixed)
        return final.next()
    }

    /// The next publish's decision. Always five draws, so settings that are off do not shift
    /// the stream of the others.
    public mutating func next() -> MQTTChaosDecision {
        let c = configuration
        let jitter = random.upTo(c.jitterMicroseconds)
        let duplicateRoll = random.unit()
        let duplicateJitter = random.upTo(c.jitterMicroseconds)
        let burstRoll = random.unit()
        let burstLength = 2 + Int(random.upTo(UInt64(c.maximumBurstLength - 2)))

        var decision = MQTTChaosDecision(delayMicroseconds: c.delayMicroseconds + jitter)
        if duplicateRoll < c.duplicateChance { decision.duplicateDelayMicroseconds = c.delayMicroseconds + duplicateJitter }
        if burstRemaining == 0, burstRoll < c.burstChance { burstRemaining = burstLength }
        if burstRemaining > 0 {
            burstRemaining -= 1
            decision.burst = burstRemaining == 0 ? .releases : .held
        }
        return decision
    }
}
