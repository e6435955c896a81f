import InkProtocol
import Testing
@testable import InkSim

private func lossPattern(_ configuration: LinkConfiguration, seed: UInt64, count: Int) -> String {
    var link = LinkImpairment(configuration: configuration, seed: seed)
    return String((0..<count).map { index -> Character in
        link.decide(size: 100, now: Instant(microseconds: UInt64(index) * 1000)) == .lost ? "x" : "."
    })
}

private func bernoulli(_ p: Double) -> LinkConfiguration {
    var c = LinkConfiguration.clean(delay: .milliseconds(10))
    c.loss = .bernoulli(p)
    return c
}

@Test func bernoulliDropPatternForSeedOneIsFixed() {
    let pattern = lossPattern(bernoulli(0.2), seed: 1, count: 40)
    #expect(pattern == ".x....x.x.....x.....x.x..xx.........x...", "seed 1")
}

@Test func sameSeedGivesSameDecisions() {
    var c = bernoulli(0.1)
    c.jitter = .milliseconds(5)
    c.reorderChance = 0.05
    c.duplicateChance = 0.05
    c.bytesPerSecond = 125_000
    var a = LinkImpairment(configuration: c, seed: 42)
    var b = LinkImpairment(configuration: c, seed: 42)
    var differentSeed = LinkImpairment(configuration: c, seed: 43)
    var sawDifference = false
    for index in 0..<2000 {
        let now = Instant(microseconds: UInt64(index) * 700)
        let decision = a.decide(size: 200 + index % 50, now: now)
        #expect(decision == b.decide(size: 200 + index % 50, now: now), "seed 42 index \(index)")
        if decision != differentSeed.decide(size: 200 + index % 50, now: now) { sawDifference = true }
    }
    #expect(sawDifference, "seeds 42 and 43")
}

/// The random part depends on the seed and the index only: delay and bandwidth do not shift it.
@Test func lossPatternIgnoresDelayAndRate() {
    var slow = bernoulli(0.2)
    slow.delay = .milliseconds(80)
    slow.jitter = .milliseconds(3)
    slow.bytesPerSecond = 10_000
    #expect(lossPattern(slow, seed: 7, count: 500) == lossPattern(bernoulli(0.2), seed: 7, count: 500))
}

@Test func ratesStayWithinTolerance() {
    var c = bernoulli(0.1)
    c.reorderChance = 0.05
    c.duplicateChance = 0.02
    var link = LinkImpairment(configuration: c, seed: 9)
    let count = 20_000
    var lost = 0, reordered = 0, duplicated = 0
    for index in 0..<count {
        switch link.decide(size: 100, now: Instant(microseconds: UInt64(index))) {
        case .lost: lost += 1
        case .deliver(_, let duplicate, let wasReordered):
            if wasReordered { reordered += 1 }
            if duplicate != nil { duplicated += 1 }
        case .oversize: Issue.record("oversize, seed 9")
        }
    }
    #expect(abs(Double(lost) / Double(count) - 0.1) < 0.01, "seed 9 lost \(lost)")
    #expect(abs(Double(reordered) / Double(count - lost) - 0.05) < 0.01, "seed 9 reordered \(reordered)")
    #expect(abs(Double(duplicated) / Double(count - lost) - 0.02) < 0.005, "seed 9 duplicated \(duplicated)")
}

@Test func gilbertElliottLossMatchesItsMeanAndComesInBursts() {
    var c = LinkConfiguration.clean()
    let model = GilbertElliott(goodToBad: 0.02, badToGood: 0.25)
    c.loss = .gilbertElliott(model)
    let pattern = lossPattern(c, seed: 3, count: 50_000)
    let lost = pattern.filter { $0 == "x" }.count
    #expect(abs(Double(lost) / 50_000 - model.meanLoss) < 0.015, "seed 3 lost \(lost)")
    // Bursty: a loss is followed by another far more often than the mean rate.
    let pairs = zip(pattern, pattern.dropFirst()).filter { $0 == "x" && $1 == "x" }.count
    #expect(Double(pairs) / Double(lost) > 0.5, "seed 3 pairs \(pairs)")
}

@Test func delayRateAndOversizeAreExact() {
    var c = LinkConfiguration.clean(delay: .milliseconds(20))
    c.bytesPerSecond = 100_000  // 1000 bytes take 10 ms
    c.maximumDatagramSize = 1000
    var link = LinkImpairment(configuration: c, seed: 5)
    let zero = Instant.zero
    #expect(link.decide(size: 1000, now: zero) == .deliver(due: .milliseconds(30), duplicateDue: nil, reordered: false))
    // Queued behind the first on the bottleneck.
    #expect(link.decide(size: 1000, now: zero) == .deliver(due: .milliseconds(40), duplicateDue: nil, reordered: false))
    #expect(link.decide(size: 1001, now: zero) == .oversize)
    #expect(link.decided == 3)
}
