import InkProtocol
import Testing
@testable import InkSim

/// A short sweep of the real session; the long one is `swift run -c release inkwire-sim --seeds 1-2000`.
@Test func arqSessionPassesAShortSweep() {
    var c = SweepConfiguration()
    c.maxBatchesPerEndpoint = 60
    for seed in UInt64(1) ... 20 {
        let o = SweepRunner.run(seed: seed, configuration: c) { ARQSession(connectionID: $0.connectionID, now: $0.now) }
        #expect(o.verdict == .pass, "seed \(seed)")
    }
}

@Test func arqSweepReplaysExactly() {
    let run = { SweepRunner.run(seed: 31) { ARQSession(connectionID: $0.connectionID, now: $0.now) } }
    let first = run()
    let again = run()
    #expect(first.trace == again.trace && first.batches == again.batches && first.datagrams == again.datagrams)
}

/// The KCP experiment with the real session: every echo arrives, in order, at 5 % loss per direction.
@Test func arqCompletesTheKCPExperimentInOrder() {
    let r = KCPExperiment.run(seed: 1) { t0 in
        (ARQSession(connectionID: 1, now: t0), ARQSession(connectionID: 1, now: t0))
    }
    #expect(r.inOrder && r.complete)
    #expect(r.rtts.count == KCPExperiment.echoesWanted)
}
