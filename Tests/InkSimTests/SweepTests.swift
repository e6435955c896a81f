import InkProtocol
import Testing
@testable import InkSim

private var toyConfiguration: SweepConfiguration {
    var c = SweepConfiguration()
    c.maxBatchSize = 1400  // the toy does not fragment
    c.maxBatchesPerEndpoint = 40
    c.healBound = .milliseconds(120_000)
    return c
}

@Test func scenarioIsDecidedBySeedAlone() {
    let a = SweepScenario(seed: 77)
    let b = SweepScenario(seed: 77)
    #expect(a.description == b.description)
    #expect(a.description != SweepScenario(seed: 78).description)
    #expect(a.partitions.allSatisfy { $0.end <= a.healAt && $0.end.since($0.start) <= .milliseconds(30_000) })
}

@Test func toySessionPassesAShortSweepAndReplaysExactly() {
    for seed in UInt64(1) ... 12 {
        let first = SweepRunner.run(seed: seed, configuration: toyConfiguration) { _ in StopAndWaitEndpoint() }
        #expect(first.verdict == .pass, "seed \(seed)")
        guard seed <= 3 else { continue }
        let again = SweepRunner.run(seed: seed, configuration: toyConfiguration) { _ in StopAndWaitEndpoint() }
        #expect(again.trace == first.trace, "seed \(seed)")
        #expect(again.batches == first.batches)
    }
}

@Test func unreliableSessionIsCaughtAsCorrectnessFailure() {
    // Seed chosen so the scenario loses datagrams; pass-through then skips a batch.
    var caught = 0
    for seed in UInt64(1) ... 10 {
        let o = SweepRunner.run(seed: seed, configuration: toyConfiguration) { _ in PassThroughEndpoint() }
        if case .correctness = o.verdict { caught += 1 }
    }
    #expect(caught >= 8)
}
