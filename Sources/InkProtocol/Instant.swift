/// A point on the caller's monotonic clock, in microseconds.
///
/// The protocol core never reads a clock: every input carries `now`, and deadlines come back
/// as `Instant`s. The IO layer maps its monotonic clock onto this; the simulator counts
/// virtual time with it. Microseconds keep LAN round-trip times (well under 1 ms) measurable.
public struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var microseconds: UInt64

    public init(microseconds: UInt64) { self.microseconds = microseconds }

    public static let zero = Instant(microseconds: 0)

    public static func milliseconds(_ ms: UInt64) -> Instant { Instant(microseconds: ms &* 1000) }

    /// Whole milliseconds, rounded up, so a timer armed with it never fires early.
    public var millisecondsRoundedUp: UInt64 { (microseconds &+ 999) / 1000 }

    public static func < (a: Instant, b: Instant) -> Bool { a.microseconds < b.microseconds }

    public static func + (a: Instant, d: Duration) -> Instant {
        Instant(microseconds: a.microseconds &+ d.microseconds)
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    public func since(_ earlier: Instant) -> Duration {
        Duration(microseconds: microseconds >= earlier.microseconds ? microseconds - earlier.microseconds : 0)
    }

    public var description: String { "\(microseconds)us" }

    /// A span of time in microseconds (the core avoids Swift.Duration's 128-bit arithmetic).
    public struct Duration: Comparable, Hashable, Sendable, CustomStringConvertible {
        public var microseconds: UInt64
        public init(microseconds: UInt64) { self.microseconds = microseconds }
        public static func milliseconds(_ ms: UInt64) -> Duration { Duration(microseconds: ms &* 1000) }
        public static let zero = Duration(microseconds: 0)
        public static func < (a: Duration, b: Duration) -> Bool { a.microseconds < b.microseconds }
        public static func + (a: Duration, b: Duration) -> Duration { Duration(microseconds: a.microseconds &+ b.microseconds) }
        public static func * (a: Duration, k: UInt64) -> Duration { Duration(microseconds: a.microseconds &* k) }
        public var description: String { "\(microseconds)us" }
    }
}

/// Anything that exchanges datagrams in virtual or real time: an ARQ session, a test peer.
///
/// Call order, for the IO layer and the simulator alike: feed every received datagram with
/// `handleDatagram`, call `handleTimeout` when the deadline from `pollTimeout` passes (calling
/// it early or twice is harmless), then drain `pollTransmit` until it returns nil and re-arm
/// the timer from `pollTimeout`.
public protocol DatagramEndpoint: AnyObject {
    func handleDatagram(_ datagram: [UInt8], now: Instant)
    func handleTimeout(now: Instant)
    func pollTransmit(now: Instant) -> [UInt8]?
    func pollTimeout() -> Instant?
}
