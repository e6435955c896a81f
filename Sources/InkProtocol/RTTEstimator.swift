/// Round-trip time estimate and retransmission timeout, per RFC 6298.
///
/// Samples come from echoed timestamps, so a retransmitted segment never produces an
/// ambiguous sample (Karn's problem does not arise).
public struct RTTEstimator: Sendable {
    /// Clock granularity G of RFC 6298: the IO layer's timers count whole milliseconds.
    public static let granularity = Instant.Duration.milliseconds(1)

    public private(set) var smoothed: Instant.Duration
    public private(set) var variation: Instant.Duration
    public private(set) var latest: Instant.Duration
    public private(set) var minimum: Instant.Duration?
    public private(set) var hasSample = false

    /// Before the first sample: SRTT = `initial`, RTTVAR = `initial` / 2.
    public init(initial: Instant.Duration) {
        smoothed = initial
        variation = Instant.Duration(microseconds: initial.microseconds / 2)
        latest = initial
    }

    public mutating func add(sample: Instant.Duration) {
        latest = sample
        if let m = minimum { minimum = min(m, sample) } else { minimum = sample }
        if !hasSample {
            hasSample = true
            smoothed = sample
            variation = Instant.Duration(microseconds: sample.microseconds / 2)
            return
        }
        let s = smoothed.microseconds, r = sample.microseconds
        let deviation = s > r ? s - r : r - s
        variation = Instant.Duration(microseconds: (3 * variation.microseconds + deviation) / 4)
        smoothed = Instant.Duration(microseconds: (7 * s + r) / 8)
    }

    /// RTO = SRTT + max(G, 4 * RTTVAR), clamped to [floor, ceiling].
    public func retransmissionTimeout(floor: Instant.Duration, ceiling: Instant.Duration) -> Instant.Duration {
        let raw = smoothed + max(RTTEstimator.granularity, variation * 4)
        return min(max(raw, floor), ceiling)
    }

    /// RFC 9002 time threshold: 9/8 of the larger of SRTT and the latest sample, at least G.
    public var lossDelay: Instant.Duration {
        let base = max(smoothed, latest).microseconds
        return max(Instant.Duration(microseconds: base + base / 8), RTTEstimator.granularity)
    }
}
