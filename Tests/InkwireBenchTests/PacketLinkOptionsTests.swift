import InkProtocol
import InkSim
import Testing
@testable import inkwire_bench

@Test func packetLinkOptionsParseImpairmentModesAndCommand() throws {
    let command = try PacketLinkOptions([
        "--loss-percent", "10", "--delay-ms", "20", "--seed", "9", "--name", "bench_1", "--in", "server",
        "--tcp-cc", "reno", "--", "/bin/echo", "--loss-percent", "x",
    ])
    #expect(command.link.loss == .bernoulli(0.10))
    #expect(command.link.delay == .milliseconds(20))
    #expect(command.seed == 9)
    #expect(command.prefix == "bench_1")
    #expect(command.tcpCongestionControl == "reno")
    #expect(command.mode == .command(["/bin/echo", "--loss-percent", "x"], .server))

    #expect(try PacketLinkOptions([]).mode == .wait)
    #expect(try PacketLinkOptions(["--wait", "--duration", "2"]).durationSeconds == 2)
    let probe = try PacketLinkOptions(["--probe", "--probe-seconds", "1.5", "--loss-model", "gilbert-elliott:5,30"])
    #expect(probe.mode == .probe && probe.probeSeconds == 1.5)
    #expect(probe.link.loss == .gilbertElliott(GilbertElliott(goodToBad: 0.05, badToGood: 0.30, lossWhenGood: 0, lossWhenBad: 1)))
}

@Test(arguments: [
    ["--name", "bad-prefix"], ["--name", ""], ["--in", "server"], ["--wait", "--probe"], ["--wait", "--", "/bin/true"],
    ["--"], ["--listen", "127.0.0.1:1"], ["--loss-percent", "101"], ["--tcp-cc", "../x"], ["--probe-seconds", "0"],
])
func packetLinkOptionsRejectBadInput(_ arguments: [String]) {
    #expect(throws: LinkProxyOptions.Invalid.self) { try PacketLinkOptions(arguments) }
}

/// Packets due at the same microsecond leave in arrival order; earlier due times first.
@Test func dueHeapOrdersByDueThenArrival() {
    var heap = DueHeap<(due: UInt64, serial: Int)> { ($0.due, $0.serial) < ($1.due, $1.serial) }
    let dues: [UInt64] = [50, 10, 50, 30, 10, 70, 30, 50, 0, 10]
    for (serial, due) in dues.enumerated() { heap.push((due, serial)) }
    var order: [Int] = []
    while let next = heap.popFirst() { order.append(next.serial) }
    #expect(order == [8, 1, 4, 9, 3, 6, 0, 2, 7, 5])
}
