/// Bounded exponential backoff for broker reconnects: the first retry waits `minimum`, each
/// failure doubles the wait, never beyond `maximum`; a successful connect resets it.
public struct MQTTBackoff: Sendable, Equatable {
    /// Wait before the first retry, microseconds.
    public let minimum: UInt64
    /// Cap on any wait, microseconds.
    public let maximum: UInt64
    /// Failed attempts since the last success (saturates, so the doubling cannot overflow).
    public private(set) var failures = 0

    /// Doublings after which the wait is certainly at the cap (2^40 µs is about 12 days).
    static let maximumDoublings = 40

    public init(minimumMicroseconds: UInt64, maximumMicroseconds: UInt64) {
        self.minimum = max(1, minimumMicroseconds)
        self.maximum = max(self.minimum, maximumMicroseconds)
    }

    /// The wait before the next attempt; counts one more failure.
    public mutating func nextDelay() -> UInt64 {
        let shift = min(failures, MQTTBackoff.maximumDoublings)
        failures = min(failures + 1, MQTTBackoff.maximumDoublings)
        let (scaled, overflow) = minimum.multipliedReportingOverflow(by: UInt64(1) << UInt64(shift))
        return overflow ? maximum : min(scaled, maximum)
    }

    /// Called after a successful connect.
    public mutating func reset() { failures = 0 }
}
