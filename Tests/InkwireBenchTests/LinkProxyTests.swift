import InkProtocol
import InkSim
import InkUV
import Testing
@testable import inkwire_bench

/// Which datagram indices a zero-delay direction lets through, per `LinkImpairment`.
private func survivors(of indices: [Int], configuration: LinkConfiguration, seed: UInt64) -> [Int] {
    var link = LinkImpairment(configuration: configuration, seed: seed)
    return indices.filter { _ in link.decide(size: 16, now: .zero) != .lost }
}

/// A real UDP echo on 127.0.0.1 behind the proxy: the datagrams that reach the echo server and
/// come back are exactly those the seed's per-direction decisions let through, in order.
@Test func proxyDropsExactlyWhatTheSeedDecides() throws {
    let seed: UInt64 = 11
    let count = 200
    let loop = try EventLoop()
    defer { loop.shutdown() }
    let echo = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
    var echoed: [Int] = []
    try echo.startReceiving { bytes, sender in
        echoed.append(Int(bytes.load(as: UInt16.self)))
        _ = try? echo.send(bytes, to: sender)
    }
    let options = try LinkProxyOptions([
        "--listen", "127.0.0.1:0", "--forward", "\(try echo.localAddress)", "--loss-percent", "20", "--seed", "\(seed)",
    ])
    let proxy = try LinkProxy(options: options, sharing: loop, watchesSignals: false)
    let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
    var returned: [Int] = []
    try client.startReceiving { bytes, _ in returned.append(Int(bytes.load(as: UInt16.self))) }

    var root = SimRandom(seed: seed)
    let expectedAtEcho = survivors(of: Array(0..<count), configuration: options.link, seed: root.next())
    let expectedBack = survivors(of: expectedAtEcho, configuration: options.link, seed: root.next())

    // One datagram per millisecond keeps the kernel buffers far from full; the watchdog only
    // ends a run that went wrong (the expectations below then fail with the seed).
    let target = try proxy.listenAddress
    let pacer = try LoopTimer(loop: loop)
    var sent = 0
    var idleTicks = 0
    pacer.start(afterMicroseconds: 1000, repeatingEveryMicroseconds: 1000) {
        if sent < count {
            var index = UInt16(sent)
            _ = withUnsafeBytes(of: &index) { try? client.send($0, to: target) }
            sent += 1
        } else if returned.count >= expectedBack.count || idleTicks > 5000 {
            loop.stop()
        } else {
            idleTicks += 1
        }
    }
    _ = loop.run()

    #expect(echoed == expectedAtEcho, "seed \(seed)")
    #expect(returned == expectedBack, "seed \(seed)")
    #expect(proxy.toServerCounters.received == count, "seed \(seed)")
    #expect(proxy.toServerCounters.dropped == count - expectedAtEcho.count, "seed \(seed)")
    #expect(proxy.toClientCounters.forwarded == expectedBack.count, "seed \(seed)")
    #expect(proxy.reportJSON().contains("\"client_to_server\":{\"received\":\(count),"), "seed \(seed)")
}

@Test func optionsRejectBadValuesWithAMessage() {
    #expect(throws: LinkProxyOptions.Invalid.self) { try LinkProxyOptions(["--listen", "127.0.0.1:1"]) }
    #expect(throws: LinkProxyOptions.Invalid.self) {
        try LinkProxyOptions(["--listen", "127.0.0.1:1", "--forward", "127.0.0.1:2", "--loss-percent", "101"])
    }
    #expect(throws: LinkProxyOptions.Invalid.self) {
        try LinkProxyOptions(["--listen", "127.0.0.1:1", "--forward", "127.0.0.1:2", "--loss-model", "gilbert-elliott:1"])
    }
    let ge = try? LinkProxyOptions(["--listen", "127.0.0.1:1", "--forward", "127.0.0.1:2", "--loss-model", "gilbert-elliott:2,25",
                                     "--rate-kbps", "800", "--delay-ms", "20"])
    #expect(ge?.link.loss == .gilbertElliott(GilbertElliott(goodToBad: 0.02, badToGood: 0.25)))
    #expect(ge?.link.bytesPerSecond == 100_000)
    #expect(ge?.link.delay == .milliseconds(20))
}
