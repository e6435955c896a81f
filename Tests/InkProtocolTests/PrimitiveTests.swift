import Testing
@testable import InkProtocol

@Suite struct SequenceNumberTests {
    @Test func comparisonsAcrossTheWrap() {
        let last = SequenceNumber(UInt32.max)
        let first = last.advanced(by: 1)
        #expect(first.rawValue == 0)
        #expect(last.precedes(first))
        #expect(!first.precedes(last))
        #expect(last.distance(to: first) == 1)
        #expect(first.distance(to: last) == -1)
        #expect(SequenceNumber(0xFFFF_FFF0).distance(to: SequenceNumber(0x10)) == 0x20)
        #expect(SequenceNumber(5).distance(to: SequenceNumber(5)) == 0)
        #expect(!SequenceNumber(5).precedes(SequenceNumber(5)))
        // Half the circle away is the boundary of what can be compared.
        #expect(SequenceNumber(0).distance(to: SequenceNumber(0x7FFF_FFFF)) == Int32.max)
        #expect(SequenceNumber(0).distance(to: SequenceNumber(0x8000_0000)) == Int32.min)
    }
}

@Suite struct CRC32CTests {
    @Test func standardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    }

    @Test func knownVectors() {
        // RFC 3720 B.4 test patterns.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum([UInt8]()) == 0)
    }

    @Test func incrementalEqualsOneShot() {
        let data = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        for cut in [0, 1, 7, 8, 9, 500, 999, 1000] {
            #expect(CRC32C.update(CRC32C.update(0, data[0..<cut]), data[cut...]) == CRC32C.checksum(data))
        }
    }
}

@Suite struct AckRangeSetTests {
    @Test func insertMergesNeighbours() {
        var set = AckRangeSet()
        let base = SequenceNumber(10)
        let r15 = set.insert(SequenceNumber(15), base: base); #expect(r15)
        let r13 = set.insert(SequenceNumber(13), base: base); #expect(r13)
        #expect(set.ranges.map(\.description) == ["13+1", "15+1"])
        let r14 = set.insert(SequenceNumber(14), base: base); #expect(r14)
        #expect(set.ranges.map(\.description) == ["13+3"])
        let r14n = set.insert(SequenceNumber(14), base: base); #expect(!r14n)
        let r12 = set.insert(SequenceNumber(12), base: base); #expect(r12)
        let r16 = set.insert(SequenceNumber(16), base: base); #expect(r16)
        let r20 = set.insert(SequenceNumber(20), base: base); #expect(r20)
        #expect(set.ranges.map(\.description) == ["12+5", "20+1"])
        set.removeBelow(SequenceNumber(14))
        #expect(set.ranges.map(\.description) == ["14+3", "20+1"])
        set.removeBelow(SequenceNumber(21))
        #expect(set.isEmpty)
    }

    @Test func acrossTheWrap() {
        var set = AckRangeSet()
        let base = SequenceNumber(UInt32.max - 2)
        set.insert(SequenceNumber(1), base: base)
        set.insert(SequenceNumber(UInt32.max), base: base)
        set.insert(SequenceNumber(0), base: base)
        #expect(set.ranges == [SequenceRange(start: SequenceNumber(UInt32.max), count: 3)])
        #expect(set.contains(SequenceNumber(0)))
        #expect(!set.contains(SequenceNumber(2)))
    }
}

@Suite struct RTTEstimatorTests {
    @Test func followsRFC6298() {
        var e = RTTEstimator(initial: .milliseconds(100))
        #expect(e.retransmissionTimeout(floor: .milliseconds(30), ceiling: .milliseconds(2000)) == .milliseconds(300))
        e.add(sample: .milliseconds(80))
        #expect(e.smoothed == .milliseconds(80))
        #expect(e.variation == .milliseconds(40))
        #expect(e.retransmissionTimeout(floor: .milliseconds(30), ceiling: .milliseconds(2000)) == .milliseconds(240))
        e.add(sample: .milliseconds(120))
        // RTTVAR = 3/4*40 + 1/4*40 = 40; SRTT = 7/8*80 + 1/8*120 = 85.
        #expect(e.variation == .milliseconds(40))
        #expect(e.smoothed == .milliseconds(85))
        #expect(e.minimum == .milliseconds(80))
        #expect(e.latest == .milliseconds(120))
        // 9/8 * max(85, 120) = 135.
        #expect(e.lossDelay == .milliseconds(135))
    }

    @Test func floorAndCeiling() {
        var e = RTTEstimator(initial: .milliseconds(100))
        for _ in 0..<50 { e.add(sample: Instant.Duration(microseconds: 300)) }
        #expect(e.retransmissionTimeout(floor: .milliseconds(30), ceiling: .milliseconds(2000)) == .milliseconds(30))
        var slow = RTTEstimator(initial: .milliseconds(100))
        slow.add(sample: .milliseconds(5000))
        #expect(slow.retransmissionTimeout(floor: .milliseconds(30), ceiling: .milliseconds(2000)) == .milliseconds(2000))
    }
}

@Suite struct CongestionControllerTests {
    @Test func slowStartLossAndPersistentCongestion() {
        var cc = CongestionController(segmentSize: 1000)
        let t = Instant.milliseconds(100)
        #expect(cc.window == 10_000)
        #expect(cc.allows(bytesInFlight: 0, adding: 50_000))
        #expect(!cc.allows(bytesInFlight: 9_500, adding: 1000))
        // Application-limited: a sparse sender does not grow the window.
        cc.onAck(bytes: 100, sentAt: t, bytesInFlightBefore: 200)
        #expect(cc.window == 10_000)
        cc.onAck(bytes: 1000, sentAt: t, bytesInFlightBefore: 9000)
        #expect(cc.window == 11_000)
        // A loss among the first segments is judged against the minimum sample (20 segments):
        // one is 5 %, random; a third is over 10 %, congestion.
        cc.onLoss(bytes: 1000, sentAt: t, now: t + .milliseconds(10))
        cc.onLoss(bytes: 1000, sentAt: t, now: t + .milliseconds(10))
        #expect(cc.window == 11_000)
        cc.onLoss(bytes: 1000, sentAt: t, now: t + .milliseconds(10))
        #expect(cc.window == 7_700)
        // A second loss from the same flight is the same event.
        cc.onLoss(bytes: 1000, sentAt: t + .milliseconds(5), now: t + .milliseconds(11))
        #expect(cc.window == 7_700)
        // Congestion avoidance: about one segment per window of acknowledged bytes.
        cc.onAck(bytes: 1000, sentAt: t + .milliseconds(20), bytesInFlightBefore: 7_000)
        #expect(cc.window == 7_700 + 1000 * 1000 / 7_700)
        cc.onPersistentCongestion(now: t + .milliseconds(30))
        #expect(cc.window == 2_000)
    }

    @Test func slowStartResumesOnceTheLossThatEndedItIsHistory() throws {
        var cc = CongestionController(segmentSize: 1000)
        let t = Instant.milliseconds(100)
        for _ in 0..<3 { cc.onLoss(bytes: 1000, sentAt: t, now: t + .milliseconds(10)) }
        #expect(cc.window == 7_000)
        // Congestion avoidance: about a segment per window of acknowledged bytes...
        cc.onAck(bytes: 1000, sentAt: t + .milliseconds(20), bytesInFlightBefore: 7_000)
        #expect(cc.window == 7_000 + 1000 * 1000 / 7_000)
        // ...until `sampleDecayWindows` windows were acknowledged with the lost share at random
        // levels: then slow start again (a window per window).
        var acked = 1000
        var resumedAt: (acked: Int, window: Int)?
        for _ in 0..<400 where resumedAt == nil {
            let before = cc.window
            cc.onAck(bytes: 1000, sentAt: t + .milliseconds(20), bytesInFlightBefore: 1_000_000)
            acked += 1000
            if cc.window == before + 1000 { resumedAt = (acked, before) } else { #expect(cc.window < before + 1000) }
        }
        let resumed = try #require(resumedAt)
        #expect(resumed.acked >= resumed.window * 8 && resumed.acked < (resumed.window + 1000) * 8 + 1000)
    }

    @Test func randomLossBelowToleranceKeepsTheWindow() {
        var cc = CongestionController(segmentSize: 1000)
        let t = Instant.milliseconds(100)
        // 40 segments acknowledged (slow start to 50_000), then 2 lost: 2 / 42 is under 10 %.
        for _ in 0..<40 { cc.onAck(bytes: 1000, sentAt: t, bytesInFlightBefore: 40_000) }
        #expect(cc.window == 50_000)
        cc.onLoss(bytes: 1000, sentAt: t, now: t + .milliseconds(10))
        cc.onLoss(bytes: 1000, sentAt: t + .milliseconds(20), now: t + .milliseconds(30))
        #expect(cc.window == 50_000)
        // A burst taking the lost share over 10 % is congestion: the window shrinks.
        for _ in 0..<8 { cc.onLoss(bytes: 1000, sentAt: t + .milliseconds(40), now: t + .milliseconds(50)) }
        #expect(cc.window == 35_000)
    }
}
