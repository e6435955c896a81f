import Testing
@testable import InkProtocol

/// The sparse-traffic redundancy timer: live batches 60 ms apart over 20 ms one-way delay.
@Suite struct ARQRedundancyTimerTests {
    struct Outcome {
        var latencies: [Int]  // ms from send to delivery at B, per message
        var datagramsAToB: Int
        var timerDatagrams: Int
        var lossEstimate: Int
    }

    /// Sends 16 small messages 60 ms apart; the first datagram sent at the send time of each
    /// message in `drops` is lost (A sends nothing else at those instants).
    static func run(timer: Bool, drops: Set<Int>) throws -> Outcome {
        var config = ARQConfiguration()
        config.redundancyTimer = timer
        let start = Instant.milliseconds(1000)
        func sendTime(_ k: Int) -> Instant { start + .milliseconds(UInt64(60 * (k + 1))) }
        var dropped: Set<Int> = []
        let net = TwoEndpointDriver(configuration: config, start: start, fault: { dir, _, t in
            guard dir == .aToB else { return [.milliseconds(20)] }
            for k in drops.sorted() where t == sendTime(k) && !dropped.contains(k) {
                dropped.insert(k)
                return []
            }
            return [.milliseconds(20)]
        })
        var latencies: [Int] = []
        net.onDeliverToB = { net, _ in
            let k = latencies.count
            latencies.append(Int(net.now.since(sendTime(k)).microseconds / 1000))
        }
        for k in 0..<16 {
            net.run(until: sendTime(k))
            try net.sendFromA(message(k))
        }
        net.runUntilQuiet()
        return Outcome(latencies: latencies, datagramsAToB: net.sentCount[.aToB]!,
                       timerDatagrams: net.a.stats.redundancyTimerDatagrams, lossEstimate: net.a.stats.lossEstimate)
    }

    @Test func twoLossesInARowAreRepairedAtTheRedundancyDelay() throws {
        // Message 2's loss (repaired by the next batch) raises the loss estimate; then the
        // datagrams of messages 10 and 11 are both lost.
        let off = try Self.run(timer: false, drops: [2, 10, 11])
        let on = try Self.run(timer: true, drops: [2, 10, 11])
        #expect(off.latencies.count == 16 && on.latencies.count == 16)
        // Without the timer message 10 waits for message 12's datagram, two batches later.
        #expect(off.latencies[10] == 140)
        #expect(off.timerDatagrams == 0)
        // With it, the copy sent half an RTT (20 ms) after the lost datagram carries it.
        #expect(on.latencies[10] == 40)
        #expect(on.latencies[11] == 40)
        #expect(on.latencies[2] == 80)
        #expect(on.timerDatagrams > 0)
        #expect(on.lossEstimate > ARQConfiguration().redundancyLossThreshold)
    }

    @Test func cleanLinkSendsNoExtraDatagrams() throws {
        let off = try Self.run(timer: false, drops: [])
        let on = try Self.run(timer: true, drops: [])
        #expect(on.timerDatagrams == 0)
        #expect(on.lossEstimate == 0)
        #expect(on.datagramsAToB == off.datagramsAToB)
        #expect(on.latencies == off.latencies)
        #expect(on.latencies == Array(repeating: 20, count: 16))
    }
}
