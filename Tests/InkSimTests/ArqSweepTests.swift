import InkProtocol
import Testing
@testable import InkSim

/// A short sweep of the real session, sealed (handshake, key updates, replay window over
/// `FakeCrypto`); the long one is `swift run -c release inkwire-sim --seeds 1-2000`.
@Test func sealedSessionPassesAShortSweep() {
    var c = SweepConfiguration()
    c.maxBatchesPerEndpoint = 60
    for seed in UInt64(1) ... 12 {
        let o = SweepRunner.run(seed: seed, configuration: c, makeSession: SealedSimEndpoint.shipped)
        #expect(o.verdict == .pass, "seed \(seed)")
    }
}

/// The ARQ alone (frames unsealed), as the sweep ran it before sessions were sealed.
@Test func bareARQPassesAShortSweep() {
    var c = SweepConfiguration()
    c.maxBatchesPerEndpoint = 60
    for seed in UInt64(1) ... 6 {
        let o = SweepRunner.run(seed: seed, configuration: c) { ARQSession(now: $0.now) }
        #expect(o.verdict == .pass, "seed \(seed)")
    }
}

@Test func sealedSweepReplaysExactly() {
    let run = { SweepRunner.run(seed: 31, makeSession: SealedSimEndpoint.shipped) }
    let first = run()
    let again = run()
    #expect(first.trace == again.trace && first.batches == again.batches && first.datagrams == again.datagrams)
}

/// The KCP experiment with the real session: every echo arrives, in order, at 5 % loss per direction.
@Test func arqCompletesTheKCPExperimentInOrder() {
    let r = KCPExperiment.run(seed: 1) { t0 in
        (ARQSession(now: t0), ARQSession(now: t0))
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
        let o = SweepRunner.run(seed: seed, configuration: c, makeSession: SealedSimEndpoint.tuned)
        #expect(o.verdict == .pass, "seed \(seed)")
    }
}
