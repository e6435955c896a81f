import Testing
@testable import InkProtocol

/// Persistent congestion (RFC 9002 section 7.6) collapses the window only when everything sent
/// over about three probe timeouts was lost, never because probe timeouts fired: a delay spike
/// fires them too, and live drawing (app-limited) never grows a collapsed window back.
@Suite struct ARQPersistentCongestionTests {
    /// A sends a 100-byte message every 60 ms for `seconds`, but none during `pause`.
    private func draw(_ net: TwoEndpointDriver, seconds: Int, pause: Range<Instant>? = nil) throws -> [[UInt8]] {
        var sent: [[UInt8]] = []
        for i in 0..<(seconds * 1000 / 60) {
            if !(pause?.contains(net.now) ?? false) {
                let m = message(i, size: 100)
                sent.append(m)
                try net.sendFromA(m)
            }
            net.run(for: .milliseconds(60))
        }
        net.runUntilQuiet()
        return sent
    }

    @Test func aDelaySpikeKeepsTheWindow() throws {
        let start = Instant.milliseconds(1000)
        let spike = start + .milliseconds(1000)
        // Every ack B sends during [spike, spike + 700 ms) arrives at spike + 720 ms, in order
        // (a stalled forwarder), while A pauses: the probe timeout fires, yet nothing is lost.
        let net = TwoEndpointDriver(start: start, fault: { dir, _, t in
            if dir == .bToA, !(t < spike), t < spike + .milliseconds(700) {
                return [(spike + .milliseconds(720)).since(t)]
            }
            return [.milliseconds(20)]
        })
        let sent = try draw(net, seconds: 3, pause: spike..<spike + .milliseconds(1000))
        #expect(net.deliveredToB == sent)
        #expect(net.a.stats.retransmissions >= 2)  // at least two probe timeouts fired
        #expect(net.a.stats.lossesDetected == 0)
        #expect(net.a.stats.congestionWindow == CongestionController.initialSegments * net.a.configuration.maxSegmentPayload)
    }

    @Test func anOutageIsPersistentCongestion() throws {
        let start = Instant.milliseconds(1000)
        let outage = start + .milliseconds(1000)
        // Both directions lose everything for 1.5 s, then heal.
        let net = TwoEndpointDriver(start: start, fault: { _, _, t in
            !(t < outage) && t < outage + .milliseconds(1500) ? [] : [.milliseconds(20)]
        })
        let sent = try draw(net, seconds: 4)
        #expect(net.deliveredToB == sent)
        #expect(net.a.stats.congestionWindow == CongestionController.minimumSegments * net.a.configuration.maxSegmentPayload)
    }
}
