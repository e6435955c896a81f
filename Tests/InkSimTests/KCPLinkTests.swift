import Testing
@testable import InkSim

/// The golden vector from the KCP experiment spec: seed 1, 40 sends A->B.
@Test func kcpLinkGoldenVector() {
    var link = KCPLatencySimulator(seed: 1)
    let outcomes = (0 ..< 40).map { _ -> String in
        switch link.send(from: .a, [0], nowMs: 0) {
        case .lost, .queueFull: return "D"
        case .queued(let delay): return String(delay)
        }
    }
    let expected = "36 49 61 42 43 41 57 36 32 54 38 43 56 33 61 56 48 53 54 D 35 35 54 60 41 43 57 50 44 50 31 58 D 39 31 31 37 31 53 58"
    #expect(outcomes.joined(separator: " ") == expected)
    #expect(link.stats(from: .a) == .init(datagrams: 40, bytes: 40, lost: 2, queueDropped: 0))
}

@Test func kcpBagLosesExactlyFivePerHundred() {
    var link = KCPLatencySimulator(seed: 9)
    for hundred in 0 ..< 20 {
        var lost = 0
        for _ in 0 ..< 100 {
            if link.send(from: .b, [1, 2], nowMs: 0) == .lost { lost += 1 }
            _ = link.receive(at: .a, nowMs: 1_000)
        }
        #expect(lost == 5, "hundred \(hundred)")
    }
}

@Test func kcpLinkIsHeadOfLineFIFO() {
    var link = KCPLatencySimulator(seed: 1, lossPercent: 0)
    var delays: [UInt64] = []
    for i in 0 ..< 3 {
        if case .queued(let d) = link.send(from: .a, [UInt8(i)], nowMs: 0) { delays.append(d) }
    }
    // Nothing arrives before the head is due, even if a later datagram is.
    let headDue = delays[0]
    #expect(link.receive(at: .b, nowMs: headDue - 1) == nil)
    var got: [[UInt8]] = []
    while let d = link.receive(at: .b, nowMs: 1_000) { got.append(d) }
    #expect(got == [[0], [1], [2]])
    #expect(link.receive(at: .a, nowMs: 1_000) == nil)
}

@Test func kcpLinkTailDropsAtCapacity() {
    var link = KCPLatencySimulator(seed: 3, lossPercent: 0)
    var full = 0
    for _ in 0 ..< (KCPLatencySimulator.queueCapacity + 10) {
        if link.send(from: .a, [0], nowMs: 0) == .queueFull { full += 1 }
    }
    #expect(full == 10)
    #expect(link.queued(from: .a) == KCPLatencySimulator.queueCapacity)
}
