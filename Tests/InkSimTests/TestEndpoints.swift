import InkProtocol
@testable import InkSim

/// An unreliable endpoint: every batch is one datagram, every datagram is delivered as it comes.
final class PassThroughEndpoint: SimReliableEndpoint {
    var outbox: [[UInt8]] = []
    var events: [SimSessionEvent] = []
    var received: [(Instant, [UInt8])] = []

    func submit(_ batch: [UInt8]) -> SimSubmitResult {
        outbox.append(batch)
        return .accepted
    }
    func nextSessionEvent() -> SimSessionEvent? { events.isEmpty ? nil : events.removeFirst() }
    var memoryUse: [SimMemoryUse] { [SimMemoryUse(name: "outbox", used: outbox.count, limit: 1000)] }

    func handleDatagram(_ datagram: [UInt8], now: Instant) {
        received.append((now, datagram))
        events.append(.delivered(datagram))
    }
    func handleTimeout(now: Instant) {}
    func pollTransmit(now: Instant) -> [UInt8]? { outbox.isEmpty ? nil : outbox.removeFirst() }
    func pollTimeout() -> Instant? { nil }
}

/// Sends `count` one-byte datagrams, one every `every`, from its own timer.
final class TickingSender: DatagramEndpoint {
    var next: Instant
    let every: Instant.Duration
    var left: Int
    var due = false
    var sent: UInt8 = 0

    init(start: Instant, every: Instant.Duration, count: Int) {
        next = start
        self.every = every
        left = count
    }
    func handleDatagram(_ datagram: [UInt8], now: Instant) {}
    func handleTimeout(now: Instant) {
        guard left > 0, now >= next else { return }
        due = true
        next = next + every
        left -= 1
    }
    func pollTransmit(now: Instant) -> [UInt8]? {
        guard due else { return nil }
        due = false
        sent &+= 1
        return [sent]
    }
    func pollTimeout() -> Instant? { left > 0 ? next : nil }
}

/// An endpoint whose deadline never moves: the network must call it a livelock.
final class StuckEndpoint: DatagramEndpoint {
    func handleDatagram(_ datagram: [UInt8], now: Instant) {}
    func handleTimeout(now: Instant) {}
    func pollTransmit(now: Instant) -> [UInt8]? { nil }
    func pollTimeout() -> Instant? { .milliseconds(5) }
}
