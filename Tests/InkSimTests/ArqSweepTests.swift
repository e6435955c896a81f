import InkProtocol
import Testing
@testable import InkSim

/// A short sweep of the real session; the long one is `swift run -c release inkwire-sim --seeds 1-2000`.
@Test func arqSessionPassesAShortSweep() {
    var c = SweepConfiguration()
    c.maxBatchesPerEndpoint = 60
    for seed in UInt64(1) ... 12 {
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

@Test func tunedSessionsMirrorSequenceStartsAndPassAShortSweep() {
    let spec = { (first: Bool) in
        SweepSessionSpec(connectionID: 9, now: .zero, endpoint: first ? 0 : 1, peer: first ? 1 : 0, isFirst: first,
                         wireRandom: 12345, maxBatchSize: 4096)
    }
    let a = ARQSession.sweepConfiguration(spec(true))
    let b = ARQSession.sweepConfiguration(spec(false))
    #expect(a.initialSequence == b.peerInitialSequence && b.initialSequence == a.peerInitialSequence)
    #expect(a.sendWindow == b.sendWindow && a.maxDatagramSize == b.maxDatagramSize)

    var c = SweepConfiguration()
    c.maxBatchesPerEndpoint = 60
    for seed in UInt64(101) ... 108 {
        let o = SweepRunner.run(seed: seed, configuration: c, makeSession: ARQSession.forSweep)
        #expect(o.verdict == .pass, "seed \(seed)")
    }
}
