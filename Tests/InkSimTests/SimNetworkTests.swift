import InkProtocol
import Testing
@testable import InkSim

/// Sends `count` datagrams from a ticking sender through one configured direction; returns the receiver and network.
private func run(_ configuration: LinkConfiguration, count: Int = 10_000, seed: UInt64 = 1,
                 every: Instant.Duration = .milliseconds(1)) throws -> (PassThroughEndpoint, SimNetwork) {
    let network = SimNetwork(seed: seed)
    let sender = TickingSender(start: .milliseconds(1), every: every, count: count)
    let receiver = PassThroughEndpoint()
    try network.connect(sender, node: 0, receiver, node: 1, aToB: configuration, bToA: .clean())
    try network.advance(to: .milliseconds(UInt64(count) * 1000 + 60_000))
    return (receiver, network)
}

@Test func bernoulliLossCountsAreExactForAFixedSeed() throws {
    var c = LinkConfiguration.clean()
    c.loss = .bernoulli(0.1)
    let (rx, net) = try run(c)
    let s = net.stats(from: 0)
    #expect(s.sentDatagrams == 10_000)
    #expect(s.lost == 982)
    #expect(rx.received.count == 10_000 - s.lost)
}

@Test func gilbertElliottLosesInBursts() throws {
    var c = LinkConfiguration.clean()
    let ge = GilbertElliott(goodToBad: 0.02, badToGood: 0.25, lossWhenGood: 0, lossWhenBad: 1)
    c.loss = .gilbertElliott(ge)
    let (rx, net) = try run(c)
    #expect(net.stats(from: 0).lost == 665)  // mean loss 7.4 %
    // Runs of consecutive losses: mean burst length is 1 / badToGood = 4.
    let got = rx.received.map { $0.1[0] }
    var bursts = 0
    var expected: UInt8 = 1
    for v in got {
        if v != expected { bursts += 1 }
        expected = v &+ 1
    }
    #expect(bursts == 162)  // 665 / 162 = 4.1 per burst
}

@Test func jitterWithoutOrderReordersAndKeepsOrderDoesNot() throws {
    var c = LinkConfiguration.clean(delay: .milliseconds(30))
    c.jitter = .milliseconds(20)
    let (loose, _) = try run(c, count: 1000)
    c.keepsOrder = true
    let (fifo, _) = try run(c, count: 1000)
    func inversions(_ r: PassThroughEndpoint) -> Int {
        zip(r.received, r.received.dropFirst()).filter { $0.1[0] != $1.1[0] &- 1 }.count
    }
    #expect(inversions(loose) == 940)
    #expect(inversions(fifo) == 0)
    #expect(fifo.received.count == 1000)
}

@Test func duplicationAndHoldBackReordering() throws {
    var c = LinkConfiguration.clean()
    c.duplicateChance = 0.05
    c.reorderChance = 0.05
    c.reorderDelay = .milliseconds(10)
    let (rx, net) = try run(c, count: 2000)
    #expect(net.stats(from: 0).duplicated == 102)
    #expect(rx.received.count == 2000 + 102)
}

@Test func bandwidthSpacesDatagramsAndQueueCapTailDrops() throws {
    var c = LinkConfiguration.clean(delay: .milliseconds(10))
    c.bytesPerSecond = 100  // one 1-byte datagram per 10 ms
    c.queueCapacity = 50
    let (rx, net) = try run(c, count: 200)
    let times = rx.received.map { $0.0.microseconds }
    #expect(zip(times, times.dropFirst()).allSatisfy { $1 - $0 == 10_000 })
    #expect(net.stats(from: 0).queueDropped == 132)
    #expect(net.stats(from: 0).maxInFlight == 50)
}

@Test func oversizeDatagramsAreDropped() throws {
    let network = SimNetwork(seed: 1)
    let a = PassThroughEndpoint()
    let b = PassThroughEndpoint()
    try network.connect(a, node: 0, b, node: 1, aToB: .clean(), bToA: .clean())
    _ = a.submit([UInt8](repeating: 7, count: LinkConfiguration.defaultMaximumDatagramSize + 1))
    _ = a.submit([1])
    try network.flush(0)
    try network.advance(to: .milliseconds(100))
    #expect(b.received.map { $0.1 } == [[1]])
    #expect(network.stats(from: 0).oversize == 1)
}

@Test func partitionDropsBothWaysUntilItHeals() throws {
    let network = SimNetwork(seed: 1)
    let sender = TickingSender(start: .milliseconds(10), every: .milliseconds(10), count: 100)
    let rx = PassThroughEndpoint()
    try network.connect(sender, node: 0, rx, node: 1, aToB: .clean(delay: .milliseconds(5)), bToA: .clean())
    network.partition([1], from: .milliseconds(200), until: .milliseconds(500))
    try network.advance(to: .milliseconds(2000))
    // Sent at 10...1000 ms; those sent in [200, 500) or arriving in it are lost: 195 ... 495 -> 30 lost.
    #expect(rx.received.count == 70)
    #expect(network.stats(from: 0).partitioned == 30)
    #expect(rx.received.allSatisfy { $0.0 < .milliseconds(200) || $0.0 >= .milliseconds(500) })
}

@Test func pauseFreezesTimersAndDropsArrivals() throws {
    let network = SimNetwork(seed: 1)
    let sender = TickingSender(start: .milliseconds(10), every: .milliseconds(10), count: 10)
    let rx = PassThroughEndpoint()
    try network.connect(sender, node: 0, rx, node: 1, aToB: .clean(delay: .milliseconds(1)), bToA: .clean())
    network.pause(0, from: .milliseconds(25), until: .milliseconds(75))
    try network.advance(to: .milliseconds(1000))
    // Ticks at 10, 20 fire; 30 ... 70 wait until the node wakes at 75 and then all catch up.
    #expect(rx.received.map { $0.0 } == [11, 21, 76, 76, 76, 76, 76, 81, 91, 101].map { Instant.milliseconds($0) })
}

@Test func stuckDeadlineIsALivelock() throws {
    let network = SimNetwork(seed: 1)
    try network.connect(StuckEndpoint(), node: 0, PassThroughEndpoint(), node: 1, aToB: .clean(), bToA: .clean())
    #expect(throws: SimFailure.livelock(endpoint: 0, at: .milliseconds(5))) {
        try network.advance(to: .milliseconds(100))
    }
}

@Test func sameSeedSameTraceDifferentSeedDifferentTrace() throws {
    var c = LinkConfiguration.clean()
    c.loss = .bernoulli(0.2)
    c.jitter = .milliseconds(15)
    c.duplicateChance = 0.1
    let one = try run(c, count: 500, seed: 5).1.trace
    let again = try run(c, count: 500, seed: 5).1.trace
    let other = try run(c, count: 500, seed: 6).1.trace
    #expect(one == again)
    #expect(one != other)
}

@Test func restartedEndpointTakesOverTheWire() throws {
    let network = SimNetwork(seed: 1)
    let sender = TickingSender(start: .milliseconds(10), every: .milliseconds(10), count: 10)
    let before = PassThroughEndpoint()
    try network.connect(sender, node: 0, before, node: 1, aToB: .clean(delay: .milliseconds(1)), bToA: .clean())
    try network.advance(to: .milliseconds(50))
    let after = PassThroughEndpoint()
    try network.replace(1, with: after)
    try network.advance(to: .milliseconds(1000))
    #expect(before.received.map { $0.1 } == [[1], [2], [3], [4]])
    #expect(after.received.map { $0.1 } == [[5], [6], [7], [8], [9], [10]])
}
