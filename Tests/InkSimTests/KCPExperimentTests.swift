import InkProtocol
import Testing
@testable import InkSim

/// Without loss, an endpoint that adds nothing measures the link's own floor: complete, in order.
@Test func passThroughOnLossFreeKCPLinkGivesTheFloor() {
    let r = KCPExperiment.run(seed: 1, lossPercent: 0) { _ in (PassThroughEndpoint(), PassThroughEndpoint()) }
    #expect(r.complete && r.inOrder)
    #expect(r.rtts.count == 1001)
    #expect(r.a.datagrams == 1005)  // 4 more messages leave while the last echoes travel
    #expect(r.averageRTT == 91 && r.maxRTT == 122)
}

/// With 5 % loss an unreliable endpoint loses an echo, and the experiment notices the gap.
@Test func passThroughOnLossyKCPLinkIsCaughtOutOfOrder() {
    let r = KCPExperiment.run(seed: 1) { _ in (PassThroughEndpoint(), PassThroughEndpoint()) }
    #expect(!r.inOrder && !r.complete)
    #expect(r.rtts.count == 7)
}
