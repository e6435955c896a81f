import Testing
@testable import InkProtocol

private typealias Buffer = ReorderBuffer<UInt32, String>

private func drain(_ b: inout Buffer) -> [String] {
    var out: [String] = []
    while let e = b.pollEvent() {
        switch e {
        case .released(let o, let s, let item): out.append("\(o):\(s)=\(item)")
        case .missing(let o, let ranges): out.append("missing \(o) \(ranges.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ","))")
        }
    }
    return out
}

@Suite struct ReorderBufferTests {
    @Test func releasesInOrderPerOriginAndDropsDuplicates() {
        var b = Buffer()
        let t = Instant.milliseconds(10)
        #expect(b.insert("b", origin: 1, sequence: 1, now: t) == .buffered)
        #expect(b.insert("x", origin: 2, sequence: 0, now: t) == .released(count: 1))
        #expect(b.insert("c", origin: 1, sequence: 2, now: t) == .buffered)
        #expect(b.insert("c", origin: 1, sequence: 2, now: t) == .duplicate)
        #expect(b.insert("a", origin: 1, sequence: 0, now: t) == .released(count: 3))
        #expect(b.insert("a", origin: 1, sequence: 0, now: t) == .duplicate)
        #expect(drain(&b) == ["2:0=x", "1:0=a", "1:1=b", "1:2=c"])
        #expect(b.nextExpected(from: 1) == 3)
        #expect(b.metrics.duplicates == 2)
        #expect(b.metrics.outOfOrder == 2)
        #expect(b.metrics.maxDepth == 2)
        #expect(b.metrics.depthHistogram[0] == 1 && b.metrics.depthHistogram[1] == 1)
        #expect(b.metrics.buffered == 0)
        #expect(b.pollTimeout() == nil)
    }

    @Test func gapTimeoutReportsMissingRangesUntilFilled() {
        var config = Buffer.Configuration()
        config.gapTimeout = .milliseconds(100)
        var b = Buffer(configuration: config)
        b.expect(7, next: 10)
        let t0 = Instant.milliseconds(1000)
        b.insert("13", origin: 7, sequence: 13, now: t0)
        b.insert("15", origin: 7, sequence: 15, now: t0 + .milliseconds(5))
        b.insert("16", origin: 7, sequence: 16, now: t0 + .milliseconds(6))
        b.insert("3", origin: 5, sequence: 3, now: t0 + .milliseconds(20))
        #expect(b.pollTimeout() == t0 + .milliseconds(100))
        b.handleTimeout(now: t0 + .milliseconds(99))
        #expect(drain(&b) == [])
        b.handleTimeout(now: t0 + .milliseconds(120))
        #expect(drain(&b) == ["missing 5 0-2", "missing 7 10-12,14-14"])
        #expect(b.missing(from: 7) == [10...12, 14...14])
        // Reported again one timeout later while still open.
        #expect(b.pollTimeout() == t0 + .milliseconds(220))
        b.insert("10", origin: 7, sequence: 10, now: t0 + .milliseconds(150))
        b.insert("11", origin: 7, sequence: 11, now: t0 + .milliseconds(150))
        b.insert("12", origin: 7, sequence: 12, now: t0 + .milliseconds(150))
        #expect(drain(&b) == ["7:10=10", "7:11=11", "7:12=12", "7:13=13"])
        b.handleTimeout(now: t0 + .milliseconds(250))
        #expect(drain(&b) == ["missing 5 0-2", "missing 7 14-14"])
        // Giving up on 14 releases what follows.
        b.skip(7, through: 14)
        #expect(drain(&b) == ["7:15=15", "7:16=16"])
        #expect(b.metrics.gapReports == 4)
    }

    @Test func memoryIsBounded() {
        var config = Buffer.Configuration()
        config.maxBufferedPerOrigin = 3
        config.maxBufferedTotal = 4
        config.maxAhead = 100
        config.maxOrigins = 2
        var b = Buffer(configuration: config)
        let t = Instant.zero
        for s in 1...3 { #expect(b.insert("", origin: 1, sequence: UInt64(s), now: t) == .buffered) }
        #expect(b.insert("", origin: 1, sequence: 4, now: t) == .full)
        #expect(b.insert("", origin: 2, sequence: 101, now: t) == .tooFarAhead)
        #expect(b.insert("", origin: 2, sequence: 100, now: t) == .buffered)
        #expect(b.insert("", origin: 2, sequence: 99, now: t) == .full)
        #expect(b.insert("", origin: 3, sequence: 0, now: t) == .full)
        #expect(b.metrics.buffered == 4)
        #expect(b.metrics.refused == 4)
        b.forget(2)
        #expect(b.metrics.buffered == 3)
        #expect(b.insert("", origin: 3, sequence: 0, now: t) == .released(count: 1))
    }

    @Test func shuffledDuplicatedStreamComesOutExactlyOnceInOrder() {
        var rng = TestRandom(seed: 9)
        var arrivals: [(UInt32, UInt64)] = []
        for origin in UInt32(0)..<4 { for s in UInt64(0)..<200 { arrivals.append((origin, s)) } }
        arrivals += arrivals.filter { _ in rng.next(3) == 0 }
        for i in stride(from: arrivals.count - 1, to: 0, by: -1) { arrivals.swapAt(i, Int(rng.next(UInt64(i + 1)))) }
        var b = Buffer()
        for (o, s) in arrivals { b.insert("\(s)", origin: o, sequence: s, now: .zero) }
        var got: [UInt32: [UInt64]] = [:]
        while let e = b.pollEvent() {
            if case .released(let o, let s, _) = e { got[o, default: []].append(s) }
        }
        for origin in UInt32(0)..<4 { #expect(got[origin] == Array(0..<200)) }
        #expect(b.metrics.buffered == 0)
    }
}
