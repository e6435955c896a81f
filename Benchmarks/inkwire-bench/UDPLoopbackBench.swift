import Glibc
import InkUV

/// `inkwire-bench udp-loopback [--count N] [--size BYTES] [--window W]`: a UDP echo over
/// 127.0.0.1 through InkUV, keeping W datagrams in flight, once with recvmmsg batches of 20 and
/// once with batches of 1. Reports echoes per second, round-trip percentiles and how many
/// datagrams each receive system call returned.
func runUDPLoopback(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "udp-loopback", usage: "usage: inkwire-bench udp-loopback [--count 200000] [--size 200] [--window 64]",
                                options: ["--count", "--size", "--window"])
    let count = cli.integer("--count", 1...100_000_000, default: 200_000)
    let size = cli.integer("--size", 8...65_507, default: 200)
    let window = cli.integer("--window", 1...65_536, default: 64)
    var rows: [[String]] = []
    var failed = false
    for batch in [UDPSocket.maximumReceiveBatch, 1] {
        let result = udpEchoRun(count: count, size: size, window: window, batch: batch)
        failed = failed || result.lost > 0
        let json: [(String, String)] = [
            ("bench", "\"udp-loopback\""), ("batch", "\(batch)"), ("count", "\(count)"), ("size", "\(size)"),
            ("window", "\(window)"), ("echoes_per_second", "\(result.perSecond)"), ("rtt_p50_us", "\(result.p50)"),
            ("rtt_p99_us", "\(result.p99)"), ("server_datagrams_per_recv", result.fill), ("lost", "\(result.lost)"),
        ]
        print("{" + json.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
        rows.append(["\(batch)", "\(result.perSecond)", "\(result.p50) / \(result.p99)", result.fill, "\(result.lost)"])
    }
    print("")
    let header = ["recv batch", "echoes/s", "rtt p50 / p99 (us)", "datagrams per recv", "lost"]
    print("| " + header.joined(separator: " | ") + " |")
    print("|" + String(repeating: " --- |", count: header.count))
    for row in rows { print("| " + row.joined(separator: " | ") + " |") }
    exit(failed ? 1 : 0)
}

private func udpEchoRun(count: Int, size: Int, window: Int, batch: Int)
    -> (perSecond: Int, p50: UInt64, p99: UInt64, fill: String, lost: Int) {
    let loop = try! EventLoop()
    let server = try! UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0), batch: batch)
    let client = try! UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0), batch: batch)
    try? server.setReceiveBufferSize(4 << 20)
    try? client.setReceiveBufferSize(4 << 20)
    let target = try! server.localAddress
    try! server.startReceiving { bytes, sender in _ = try? server.send(bytes, to: sender) }
    var sendStamps = [UInt64](repeating: 0, count: count)
    var rtts: [UInt64] = []
    rtts.reserveCapacity(count)
    var buffer = [UInt8](repeating: 0xab, count: size)
    var nextToSend = 0
    var received = 0
    func sendNext() {
        let index = nextToSend
        nextToSend += 1
        buffer.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(index).littleEndian, toByteOffset: 0, as: UInt64.self) }
        sendStamps[index] = loop.now
        _ = try? buffer.withUnsafeBytes { try client.send($0, to: target) }
    }
    try! client.startReceiving { bytes, _ in
        guard bytes.count >= 8 else { return }
        let index = Int(UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)))
        guard index < count else { return }
        rtts.append(loop.now - sendStamps[index])
        received += 1
        if nextToSend < count { sendNext() }
        if received == count { loop.stop() }
    }
    // A stall (lost datagrams) ends the run after a second without progress.
    let watchdog = try! LoopTimer(loop: loop)
    var lastReceived = -1
    watchdog.start(afterMicroseconds: 1_000_000, repeatingEveryMicroseconds: 1_000_000) {
        if received == lastReceived { loop.stop() }
        lastReceived = received
    }
    let start = loop.now
    for _ in 0..<min(window, count) { sendNext() }
    loop.run()
    let elapsed = max(loop.now - start, 1)
    rtts.sort()
    let fill = server.receiveBatches == 0 ? "n/a"
        : String(Double(Int(Double(server.datagramsReceived) / Double(server.receiveBatches) * 100)) / 100)
    let result = (perSecond: Int(UInt64(received) * 1_000_000 / elapsed),
                  p50: rtts.isEmpty ? 0 : rtts[rtts.count / 2], p99: rtts.isEmpty ? 0 : rtts[rtts.count * 99 / 100],
                  fill: fill, lost: count - received)
    loop.shutdown()
    return result
}
