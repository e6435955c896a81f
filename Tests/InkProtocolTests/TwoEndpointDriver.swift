@testable import InkProtocol

/// A tiny two-endpoint network under a virtual clock, for scenario tests.
///
/// Each datagram handed out by `pollTransmit` is put through `fault`, which returns the
/// one-way delays of the copies to deliver (empty: dropped; two: duplicated). Datagrams are
/// delivered by due time, so differing delays reorder them.
final class TwoEndpointDriver {
    enum Direction { case aToB, bToA }

    let a: ARQSession
    let b: ARQSession
    private(set) var now: Instant
    /// Decides each datagram's fate: direction, index within that direction, send time.
    var fault: (Direction, Int, Instant) -> [Instant.Duration]
    /// Whether each side takes its events (false models a slow application).
    var aPolls = true
    var bPolls = true

    private(set) var deliveredToA: [[UInt8]] = []
    private(set) var deliveredToB: [[UInt8]] = []
    private(set) var otherEventsA: [(Instant, ARQEvent)] = []
    private(set) var otherEventsB: [(Instant, ARQEvent)] = []
    private(set) var sentCount: [Direction: Int] = [.aToB: 0, .bToA: 0]
    /// Called after each delivery to B (B's application may answer).
    var onDeliverToB: ((TwoEndpointDriver, [UInt8]) -> Void)?
    var onDeliverToA: ((TwoEndpointDriver, [UInt8]) -> Void)?

    private var inFlight: [(due: Instant, order: Int, direction: Direction, bytes: [UInt8])] = []
    private var order = 0

    init(configuration: ARQConfiguration = .init(), configurationB: ARQConfiguration? = nil,
         start: Instant = .milliseconds(1000), fault: @escaping (Direction, Int, Instant) -> [Instant.Duration] = { _, _, _ in [.milliseconds(10)] }) {
        now = start
        a = ARQSession(configuration: configuration, now: start)
        b = ARQSession(configuration: configurationB ?? configuration, now: start)
        self.fault = fault
    }

    func sendFromA(_ m: [UInt8]) throws(ARQError) { try a.send(m); flush() }
    func sendFromB(_ m: [UInt8]) throws(ARQError) { try b.send(m); flush() }

    /// Drains both endpoints' transmissions into the network and their events to the log.
    func flush() {
        var progress = true
        while progress {
            progress = false
            for (endpoint, direction) in [(a, Direction.aToB), (b, Direction.bToA)] {
                while let d = endpoint.pollTransmit(now: now) {
                    let index = sentCount[direction]!
                    sentCount[direction] = index + 1
                    for delay in fault(direction, index, now) {
                        inFlight.append((now + delay, order, direction, d))
                        order += 1
                    }
                }
            }
            if aPolls {
                while let e = a.pollEvent() {
                    progress = true
                    if case .delivered(let m) = e { deliveredToA.append(m); onDeliverToA?(self, m) } else { otherEventsA.append((now, e)) }
                }
            }
            if bPolls {
                while let e = b.pollEvent() {
                    progress = true
                    if case .delivered(let m) = e { deliveredToB.append(m); onDeliverToB?(self, m) } else { otherEventsB.append((now, e)) }
                }
            }
        }
    }

    /// Advances the virtual clock to `end` in steps of `step`.
    func run(until end: Instant, step: Instant.Duration = .milliseconds(1)) {
        while now < end {
            now = now + step
            inFlight.sort { ($0.due, $0.order) < ($1.due, $1.order) }
            while let first = inFlight.first, !(now < first.due) {
                inFlight.removeFirst()
                (first.direction == .aToB ? b : a).handleDatagram(first.bytes, now: now)
            }
            for endpoint in [a, b] {
                if let t = endpoint.pollTimeout(), !(now < t) { endpoint.handleTimeout(now: now) }
            }
            flush()
        }
    }

    func run(for d: Instant.Duration) { run(until: now + d) }

    /// Runs until both sides are idle and nothing is in flight, or `limit` passes.
    func runUntilQuiet(limit: Instant.Duration = .milliseconds(120_000)) {
        let end = now + limit
        while now < end {
            run(for: .milliseconds(10))
            if a.isIdle && b.isIdle && inFlight.isEmpty { return }
        }
    }
}

/// Deterministic pseudo-random numbers for tests (64-bit LCG, high bits).
struct TestRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
    mutating func next(_ bound: UInt64) -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return (state >> 33) % bound
    }
}

func message(_ i: Int, size: Int = 8) -> [UInt8] {
    (0..<size).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0) }
}
