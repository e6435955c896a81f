import Testing
@testable import InkProtocol

/// A device keeps proving its address (`provesAddress`) until the relay has echoed a datagram
/// of the device's that echoed the relay: a relay that sends an unproven address no more than it
/// received (docs/protocol.md 8.1) must not wait 5 s for a keepalive after the device's only ack
/// is lost. The loss benchmark showed it: a watcher joined, its ack was lost, and its first
/// strokes came 4.7 s late.
@Suite struct ARQAddressProofTests {
    /// A (the device) sends a join; B answers it; the fate of A's datagrams is `dropA(index)`.
    private func join(proves: Bool, dropA: @escaping (Int) -> Bool) throws -> TwoEndpointDriver {
        var device = ARQConfiguration()
        device.provesAddress = proves
        let net = TwoEndpointDriver(configuration: device, configurationB: ARQConfiguration(),
                                    fault: { dir, i, _ in dir == .aToB && dropA(i) ? [] : [.milliseconds(20)] })
        net.onDeliverToB = { net, _ in try? net.sendFromB(message(1, size: 40)) }
        try net.sendFromA(message(0, size: 40))
        return net
    }

    @Test func aLostAckIsFollowedByAPingNotAKeepalive() throws {
        let net = try join(proves: true, dropA: { $0 == 1 })  // the ack of the answer
        net.run(for: .milliseconds(1000))
        #expect(net.deliveredToA == [message(1, size: 40)])
        #expect(net.a.stats.probesSent >= 1)
        // Proven: the relay acknowledged the ping, which echoed it. Nothing more until keepalive.
        let sent = net.sentCount[.aToB]!
        net.run(for: .milliseconds(3000))
        #expect(net.sentCount[.aToB]! == sent)
    }

    @Test func aCleanJoinCostsAtMostOneProbeTimeout() throws {
        let net = try join(proves: true, dropA: { _ in false })
        net.run(for: .milliseconds(1000))
        let probes = net.a.stats.probesSent
        #expect(probes <= ARQSession.probeDatagramsPerTimeout)
        net.run(for: .milliseconds(3000))
        #expect(net.a.stats.probesSent == probes)
    }

    @Test func theRelaySideDoesNotPing() throws {
        let net = try join(proves: false, dropA: { $0 == 1 })
        net.run(for: .milliseconds(4000))
        #expect(net.deliveredToA == [message(1, size: 40)])
        #expect(net.a.stats.probesSent == 0)
    }
}
