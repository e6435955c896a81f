import Testing
@testable import InkProtocol

@Suite struct ARQScenarioTests {
    @Test func losslessDeliveryInOrder() throws {
        let net = TwoEndpointDriver()
        let sent = (0..<50).map { message($0) }
        for m in sent {
            try net.sendFromA(m)
            net.run(for: .milliseconds(20))
        }
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.a.stats.retransmissions == 0)
        #expect(net.a.isIdle)
    }

    @Test func firstFlightDropped() throws {
        let net = TwoEndpointDriver(fault: { dir, i, _ in dir == .aToB && i < 3 ? [] : [.milliseconds(15)] })
        let sent = (0..<5).map { message($0) }
        for m in sent { try net.sendFromA(m) }  // all in the first datagram
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.a.stats.retransmissions > 0)
    }

    @Test func allAcksDroppedForTwoSeconds() throws {
        let start = Instant.milliseconds(1000)
        let net = TwoEndpointDriver(start: start, fault: { dir, _, t in
            dir == .bToA && t < start + .milliseconds(2000) ? [] : [.milliseconds(20)]
        })
        let sent = (0..<40).map { message($0) }
        for m in sent {
            try net.sendFromA(m)
            net.run(for: .milliseconds(50))
        }
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.a.isIdle)
    }

    @Test func reorderingNetwork() throws {
        var rng = TestRandom(seed: 3)
        let net = TwoEndpointDriver(fault: { _, _, _ in [.milliseconds(5 + rng.next(60))] })
        let sent = (0..<200).map { message($0, size: 1 + $0 % 40) }
        for (i, m) in sent.enumerated() {
            try net.sendFromA(m)
            try net.sendFromB(m)
            if i % 3 == 0 { net.run(for: .milliseconds(7)) }
        }
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.deliveredToA == sent)
    }

    @Test func everyDatagramDuplicated() throws {
        let net = TwoEndpointDriver(fault: { _, i, _ in [.milliseconds(10), .milliseconds(10 + UInt64(i % 7))] })
        let sent = (0..<100).map { message($0) }
        for m in sent {
            try net.sendFromA(m)
            net.run(for: .milliseconds(3))
        }
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.b.stats.duplicateSegmentsReceived > 0)
    }

    @Test func partitionThenHeal() throws {
        let start = Instant.milliseconds(1000)
        let healAt = start + .milliseconds(31_000)
        let net = TwoEndpointDriver(start: start, fault: { _, _, t in
            t < start + .milliseconds(1000) || !(t < healAt) ? [.milliseconds(20)] : []
        })
        let sent = (0..<100).map { message($0) }
        for m in sent {
            try net.sendFromA(m)
            net.run(for: .milliseconds(100))
        }
        net.run(until: healAt)
        #expect(net.otherEventsA.map(\.1) == [.peerUnreachable])
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.otherEventsA.map(\.1) == [.peerUnreachable, .peerReachable])
        // Backoff is capped: delivery resumes within one capped probe interval of the heal.
        #expect(net.now < healAt + .milliseconds(5000))
    }

    @Test func deadPeerIsReported() throws {
        let net = TwoEndpointDriver(fault: { dir, _, _ in dir == .aToB ? [.milliseconds(10)] : [] })
        try net.sendFromA(message(1))
        net.run(for: .milliseconds(20_000))
        #expect(net.otherEventsA.count == 1)
        #expect(net.otherEventsA.first?.1 == .peerUnreachable)
        let at = net.otherEventsA.first!.0
        #expect(at == Instant.milliseconds(1000) + .milliseconds(15_000))
    }
}
