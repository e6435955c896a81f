import Testing
@testable import InkProtocol

@Suite struct ARQRobustnessTests {
    @Test func sequenceNumbersWrapAround() throws {
        var config = ARQConfiguration()
        config.initialSequence = SequenceNumber(UInt32.max - 5)
        config.peerInitialSequence = SequenceNumber(UInt32.max - 5)
        var rng = TestRandom(seed: 4)
        let net = TwoEndpointDriver(configuration: config, fault: { _, _, _ in
            rng.next(5) == 0 ? [] : [.milliseconds(5 + rng.next(20))]
        })
        let sent = (0..<60).map { message($0, size: 1 + $0 % 9) }
        for m in sent {
            try net.sendFromA(m)
            try net.sendFromB(m)
            net.run(for: .milliseconds(4))
        }
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.deliveredToA == sent)
    }

    @Test func largeMessagesAreFragmentedAndReassembledUnderLoss() throws {
        var rng = TestRandom(seed: 8)
        let net = TwoEndpointDriver(fault: { _, _, _ in
            rng.next(10) == 0 ? [] : [.milliseconds(10 + rng.next(15))]
        })
        let big = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let sent = [message(1), big, [], message(2), Array(big.prefix(1056)), Array(big.prefix(1057))]
        for m in sent { try net.sendFromA(m) }
        net.runUntilQuiet()
        #expect(net.deliveredToB == sent)
        #expect(net.a.stats.retransmissions > 0)
        #expect(throws: ARQError.messageTooLarge(size: (1 << 20) + 1, limit: 1 << 20)) {
            try net.a.send([UInt8](repeating: 0, count: (1 << 20) + 1))
        }
    }

    @Test func slowReceiverBoundsTheSender() throws {
        var config = ARQConfiguration()
        config.maxMessageSize = 4096
        config.maxPendingReceiveBytes = 16_384
        config.maxQueuedBytes = 32_768
        let net = TwoEndpointDriver(configuration: config)
        net.bPolls = false
        var accepted: [[UInt8]] = []
        var refused = 0
        for i in 0..<200 {
            let m = message(i, size: 1000)
            do throws(ARQError) {
                try net.sendFromA(m)
                accepted.append(m)
            } catch {
                #expect(error == .sendQueueFull)
                refused += 1
            }
            net.run(for: .milliseconds(5))
        }
        #expect(refused > 0)
        // The receiver held at most its pending-bytes bound; the sender at most its queue bound
        // plus what the receiver's window let into flight.
        #expect(net.b.stats.pendingReceiveBytes <= 16_384 + 1056)
        #expect(net.a.stats.queuedBytes <= 32_768)
        #expect(net.a.stats.segmentsInFlight <= 16)
        net.bPolls = true
        net.runUntilQuiet()
        #expect(net.deliveredToB == accepted)
    }

    @Test func malformedDatagramsAreIgnored() throws {
        let net = TwoEndpointDriver()
        net.b.handleDatagram([1, 2, 3], now: net.now)
        net.b.handleDatagram([0x02, 0, 0, 0, 1], now: net.now)
        #expect(net.b.stats.malformedDatagrams == 2)
        #expect(net.b.pollEvent() == nil)
        try net.sendFromA([9])
        net.runUntilQuiet()
        #expect(net.deliveredToB == [[9]])
    }

    @Test func closeIsReportedToThePeer() throws {
        let net = TwoEndpointDriver()
        try net.sendFromA([1])
        net.run(for: .milliseconds(50))
        net.a.close()
        net.flush()
        net.run(for: .milliseconds(50))
        #expect(net.otherEventsB.map(\.1) == [.peerClosed])
        #expect(throws: ARQError.closed) { try net.a.send([2]) }
        #expect(net.a.pollTimeout() == nil)
    }

    @Test func idleSessionsKeepAliveAndStayQuiet() throws {
        let net = TwoEndpointDriver()
        try net.sendFromA([1])
        net.run(for: .milliseconds(60_000))
        #expect(net.otherEventsA.isEmpty && net.otherEventsB.isEmpty)
        // One ping per side per keepalive interval, plus their acks: bounded chatter.
        #expect(net.a.stats.datagramsSent <= 2 + 2 * 12)
        #expect(net.a.stats.probesSent >= 10)
    }

    @Test(arguments: 1...12)
    func randomFaultSoak(seed: Int) throws {
        var rng = TestRandom(seed: UInt64(seed))
        let loss = rng.next(50)
        let duplicate = rng.next(10)
        let jitter = 1 + rng.next(80)
        let net = TwoEndpointDriver(fault: { _, _, _ in
            if rng.next(100) < loss { return [] }
            var copies: [Instant.Duration] = [.milliseconds(2 + rng.next(jitter))]
            if rng.next(100) < duplicate { copies.append(.milliseconds(2 + rng.next(jitter))) }
            return copies
        })
        var sentA: [[UInt8]] = [], sentB: [[UInt8]] = []
        for i in 0..<150 {
            let size = rng.next(20) == 0 ? Int(rng.next(5000)) : Int(rng.next(40))
            if rng.next(2) == 0 {
                let m = message(i, size: size)
                try net.sendFromA(m)
                sentA.append(m)
            } else {
                let m = message(i, size: size)
                try net.sendFromB(m)
                sentB.append(m)
            }
            net.run(for: .milliseconds(rng.next(40)))
        }
        net.runUntilQuiet(limit: .milliseconds(600_000))
        #expect(net.deliveredToB == sentA, "seed \(seed) loss \(loss)%")
        #expect(net.deliveredToA == sentB, "seed \(seed) loss \(loss)%")
    }
}
