import Testing
@testable import InkProtocol

/// Exact wire behaviour of one or two sessions driven by hand.
@Suite struct ARQBehaviorTests {
    let t0 = Instant.milliseconds(1000)

    private func frames(_ s: ARQSession, at now: Instant) throws -> [Frame] {
        var out: [Frame] = []
        while let d = s.pollTransmit(now: now) { out.append(try FrameCodec.decode(d)) }
        return out
    }

    @Test func aSingleLostDatagramIsRepairedByTheNextOne() throws {
        let a = ARQSession(now: t0)
        let b = ARQSession(now: t0)
        try a.send([1])
        let lost = try #require(a.pollTransmit(now: t0))
        #expect(try FrameCodec.decode(lost).segments.map(\.sequence.rawValue) == [0])
        try a.send([2])
        let next = try #require(a.pollTransmit(now: t0 + .milliseconds(20)))
        #expect(try FrameCodec.decode(next).segments.map(\.sequence.rawValue) == [0, 1])
        b.handleDatagram(next, now: t0 + .milliseconds(50))
        #expect(b.pollEvent() == .delivered([1]))
        #expect(b.pollEvent() == .delivered([2]))
        #expect(a.stats.retransmissions == 0)
        #expect(a.stats.redundantSegments == 1)
    }

    @Test func acknowledgementsAreDelayedByTheAdvertisedBoundAtMost() throws {
        let a = ARQSession(now: t0)
        let b = ARQSession(now: t0)
        try a.send([1, 2, 3])
        let d = try #require(a.pollTransmit(now: t0))
        let sent = try FrameCodec.decode(d)
        #expect(sent.ack == nil)
        #expect(sent.extensions == [FrameExtension(type: FrameExtension.maxAckDelayType, value: [0xA8, 0xC3, 0x01])])
        let arrival = t0 + .milliseconds(10)
        b.handleDatagram(d, now: arrival)
        #expect(b.pollTransmit(now: arrival) == nil)
        #expect(b.pollTimeout() == arrival + .milliseconds(25))
        b.handleTimeout(now: arrival + .milliseconds(24))
        #expect(b.pollTransmit(now: arrival + .milliseconds(24)) == nil)
        b.handleTimeout(now: arrival + .milliseconds(25))
        let acks = try frames(b, at: arrival + .milliseconds(25))
        #expect(acks.count == 1)
        let ack = try #require(acks.first?.ack)
        #expect(ack.cumulative == SequenceNumber(1))
        #expect(ack.echoedTimestamp == sent.timestamp)
        #expect(ack.ackDelay == 25_000 / 8)
        #expect(ack.window == 1024)
        #expect(acks.first?.segments == [])
        // The sender takes the RTT without the receiver's hold time.
        a.handleDatagram(try #require(acks.first.map(FrameCodec.encode)), now: arrival + .milliseconds(35))
        #expect(a.stats.latestRTT == .milliseconds(20))
        #expect(a.isIdle)
    }

    @Test func aGapIsAcknowledgedAtOnceWithRanges() throws {
        var config = ARQConfiguration()
        config.redundantCopies = 0
        let a = ARQSession(configuration: config, now: t0)
        let b = ARQSession(configuration: config, now: t0)
        var sent: [[UInt8]] = []
        for i in 0..<4 {
            try a.send([UInt8(i)])
            sent.append(try #require(a.pollTransmit(now: t0 + .milliseconds(UInt64(i)))))
        }
        let now = t0 + .milliseconds(30)
        b.handleDatagram(sent[1], now: now)
        b.handleDatagram(sent[3], now: now)
        let acks = try frames(b, at: now)
        #expect(acks.count == 1)
        #expect(acks[0].ack?.cumulative == SequenceNumber(0))
        #expect(acks[0].ack?.ranges == [SequenceRange(start: SequenceNumber(1), count: 1), SequenceRange(start: SequenceNumber(3), count: 1)])
        #expect(b.pollEvent() == nil)
        // Packet threshold: three later datagrams arrived, so segment 0 is resent at once;
        // segment 2 (one later datagram) waits for the time threshold.
        a.handleDatagram(FrameCodec.encode(acks[0]), now: now + .milliseconds(30))
        let resent = try frames(a, at: now + .milliseconds(30))
        #expect(resent.map { $0.segments.map(\.sequence.rawValue) } == [[0]])
        #expect(a.stats.lossesDetected == 1)
        b.handleDatagram(FrameCodec.encode(resent[0]), now: now + .milliseconds(60))
        #expect(b.pollEvent() == .delivered([0]))
        #expect(b.pollEvent() == .delivered([1]))
        #expect(b.pollEvent() == nil)
    }

    @Test func aPureAckReportsTheLowestAndTheNewestRanges() throws {
        var config = ARQConfiguration()
        config.redundantCopies = 0
        let a = ARQSession(configuration: config, now: t0)
        let b = ARQSession(configuration: config, now: t0)
        var sent: [[UInt8]] = []
        for i in 0..<80 {
            try a.send([UInt8(i)])
            sent.append(try #require(a.pollTransmit(now: t0)))
        }
        // Every other datagram is lost and the rest arrive together: 40 runs above the
        // cumulative point, far more than a frame carrying segments counts on (8).
        let arrival = t0 + .milliseconds(10)
        for i in stride(from: 1, to: 80, by: 2) { b.handleDatagram(sent[i], now: arrival) }
        let acks = try frames(b, at: arrival)
        #expect(acks.count == 1)
        let ranges = try #require(acks.first?.ack?.ranges)
        #expect(ranges.map(\.start.rawValue) == [1, 3, 5] + stride(from: 23, through: 79, by: 2).map { UInt32($0) })
        #expect(ranges.allSatisfy { $0.count == 1 })
        // Lost by the packet threshold (3 later datagrams): the holes 0-76, and the runs the
        // ack left out (7-21); every reported segment stays acknowledged.
        a.handleDatagram(FrameCodec.encode(acks[0]), now: t0 + .milliseconds(20))
        let resent = try frames(a, at: t0 + .milliseconds(20)).flatMap { $0.segments.map(\.sequence.rawValue) }
        #expect(resent == (stride(from: 0, through: 76, by: 2).map { UInt32($0) } + stride(from: 7, through: 21, by: 2).map { UInt32($0) }).sorted())
    }

    @Test func probeTimeoutBacksOffAndIsCapped() throws {
        let a = ARQSession(now: t0)
        try a.send([7])
        var sendTimes: [UInt64] = []
        var now = t0
        while sendTimes.count < 13 {
            if let t = a.pollTimeout(), !(now < t) { a.handleTimeout(now: now) }
            while a.pollTransmit(now: now) != nil { sendTimes.append((now.microseconds - t0.microseconds) / 1000) }
            now = now + .milliseconds(1)
        }
        // PTO = SRTT 100 + 4 x RTTVAR 50 + peer ack delay 25 = 325 ms, doubled, capped at 2 s;
        // two probe datagrams each time (`probeDatagramsPerTimeout`).
        #expect(sendTimes == [0, 325, 325, 975, 975, 2275, 2275, 4275, 4275, 6275, 6275, 8275, 8275])
        #expect(a.stats.retransmissions == 12)
    }
}
