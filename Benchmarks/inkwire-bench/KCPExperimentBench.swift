import Foundation
import InkProtocol
import InkSim

/// `inkwire-bench kcp-experiment [--seeds 1-50] [--loss-percent 5]`
///
/// KCP's latency experiment (docs kcp-latency-experiment.md) with two Inkwire sessions, one run
/// per seed (`srand(seed)`). `--loss-percent` is the loss per direction (KCP's `lostrate / 2`;
/// the experiment's default `lostrate 10` gives 5); 0 gives the loss-free floor.
/// `--endpoint passthrough` replaces the sessions with no ARQ at all (the link's own floor).
/// Prints one JSON line, then a table beside KCP's reference numbers.
func runKCPExperiment(_ arguments: [String]) -> Never {
    var seeds = Array(1 ... 50)
    var lossPercent = KCPLatencySimulator.defaultLossPercent
    var endpointKind = "arq"
    var i = 0
    while i < arguments.count {
        let value = i + 1 < arguments.count ? arguments[i + 1] : ""
        switch arguments[i] {
        case "--seeds":
            guard let parsed = parseSeedList(value) else { benchUsage("bad --seeds \(value)") }
            seeds = parsed
        case "--loss-percent":
            guard let p = Int(value), (0 ... 100).contains(p) else { benchUsage("bad --loss-percent \(value)") }
            lossPercent = p
        case "--endpoint":
            guard ["arq", "passthrough"].contains(value) else { benchUsage("bad --endpoint \(value)") }
            endpointKind = value
        default:
            benchUsage("unknown argument \(arguments[i])")
        }
        i += 2
    }

    var results: [KCPExperiment.Result] = []
    var statsA: [ARQStats] = []
    var statsB: [ARQStats] = []
    for seed in seeds {
        var pair: (ARQSession, ARQSession)? = nil
        results.append(KCPExperiment.run(seed: UInt32(truncatingIfNeeded: seed), lossPercent: lossPercent) { t0 in
            if endpointKind == "passthrough" { return (PassThroughSession(), PassThroughSession()) }
            let p = (ARQSession(connectionID: 1, now: t0), ARQSession(connectionID: 1, now: t0))
            pair = p
            return p
        })
        if let pair {
            statsA.append(pair.0.stats)
            statsB.append(pair.1.stats)
        }
    }

    let n = Double(results.count)
    let pooled = results.flatMap(\.rtts).sorted()
    func mean(_ f: (KCPExperiment.Result) -> Int) -> Double { (Double(results.map(f).reduce(0, +)) / n * 10).rounded() / 10 }
    func percentile(_ p: Int) -> Int {
        guard !pooled.isEmpty else { return 0 }
        let rank = (p * pooled.count + 99) / 100  // nearest rank
        return Int(pooled[max(rank, 1) - 1])
    }
    let avg = mean(\.averageRTT)
    let maxRTT = mean(\.maxRTT)
    let p50 = percentile(50), p95 = percentile(95), p99 = percentile(99)
    let datagramsA = mean(\.a.datagrams), bytesA = mean(\.a.bytes)
    let datagramsB = mean(\.b.datagrams), bytesB = mean(\.b.bytes)
    let inOrder = results.allSatisfy { $0.inOrder && $0.complete }
    let failing = results.filter { !($0.inOrder && $0.complete) }.map(\.seed)
    // Where the latency goes: echoes slower than the link's slowest loss-free round trip
    // (2 x 61 ms) needed some recovery; the session counters say which kind.
    let slowest = 2 * (KCPLatencySimulator.minimumDelayMs + UInt64(KCPLatencySimulator.delaySpreadMs) - 1)
    let lateShare = pooled.isEmpty ? 0 : Double(pooled.filter { UInt64($0) > slowest }.count) / Double(pooled.count)
    func perSeed(_ s: [ARQStats], _ f: (ARQStats) -> Int) -> Double {
        s.isEmpty ? 0 : (Double(s.map(f).reduce(0, +)) / Double(s.count) * 10).rounded() / 10
    }
    let targets = avg <= 108 && maxRTT <= 250 && p99 <= 200 && bytesA <= 60_761 && inOrder

    let json: [(String, String)] = [
        ("bench", "\"kcp-experiment\""), ("endpoint", "\"\(endpointKind)\""),
        ("seeds", "\"\(seeds.first ?? 0)-\(seeds.last ?? 0)\""), ("seed_count", "\(seeds.count)"),
        ("loss_percent", "\(lossPercent)"), ("avgrtt", "\(avg)"), ("maxrtt", "\(maxRTT)"),
        ("p50", "\(p50)"), ("p95", "\(p95)"), ("p99", "\(p99)"),
        ("datagrams_a", "\(datagramsA)"), ("bytes_a", "\(bytesA)"),
        ("datagrams_b", "\(datagramsB)"), ("bytes_b", "\(bytesB)"),
        ("late_share", "\((lateShare * 10000).rounded() / 10000)"),
        ("retransmissions_a", "\(perSeed(statsA, \.retransmissions))"), ("retransmissions_b", "\(perSeed(statsB, \.retransmissions))"),
        ("redundant_segments_a", "\(perSeed(statsA, \.redundantSegments))"), ("redundant_segments_b", "\(perSeed(statsB, \.redundantSegments))"),
        ("pure_acks_a", "\(perSeed(statsA, \.pureAcksSent))"), ("probes_a", "\(perSeed(statsA, \.probesSent))"),
        ("in_order", "\(inOrder)"), ("failed_seeds", "[\(failing.map(String.init).joined(separator: ","))]"),
        ("targets_met", "\(lossPercent == 5 ? "\(targets)" : "null")"),
    ]
    print("{" + json.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")

    func row(_ cells: [String]) -> String { "| " + cells.joined(separator: " | ") + " |" }
    print("")
    print(row(["mode", "avgrtt", "maxrtt", "p50 / p95 / p99", "datagrams A->link", "bytes A->link"]))
    print(row(["---", "---", "---", "---", "---", "---"]))
    print(row(["Inkwire \(endpointKind), \(lossPercent) % loss", "\(avg)", "\(maxRTT)", "\(p50) / \(p95) / \(p99)",
               "\(datagramsA)", "\(bytesA)"]))
    print(row(["KCP normal, 5 % loss", "157.2", "586", "121 / 308 / 479", "1292", "58809"]))
    print(row(["KCP fast, 5 % loss", "138.2", "420", "113 / 241 / 337", "1331", "60761"]))
    print(row(["KCP loss-free floor", "98.4", "132", "99 / 120 / 127", "", ""]))
    print(row(["target (5 % loss)", "<= 108", "<= 250", "p99 <= 200", "", "<= 60761"]))
    if !failing.isEmpty { print("seeds with missing or out-of-order echoes: \(failing)") }
    exit(inOrder ? 0 : 1)
}

/// "1-50", "7" or "1,4,9-12".
func parseSeedList(_ text: String) -> [Int]? {
    var seeds: [Int] = []
    for part in text.split(separator: ",") {
        let bounds = part.split(separator: "-", maxSplits: 1).map { Int($0) }
        guard let lo = bounds.first ?? nil else { return nil }
        let hi = bounds.count == 2 ? bounds[1] : lo
        guard let hi, lo <= hi, lo >= 0 else { return nil }
        seeds.append(contentsOf: lo ... hi)
    }
    return seeds.isEmpty ? nil : seeds
}

func benchUsage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("inkwire-bench kcp-experiment: \(message)\nusage: inkwire-bench kcp-experiment [--seeds 1-50] [--loss-percent 5] [--endpoint arq|passthrough]\n".utf8))
    exit(64)
}

/// No ARQ at all: the link's own floor (only meaningful at 0 % loss).
private final class PassThroughSession: SimReliableEndpoint {
    private var outbox: [[UInt8]] = []
    private var inbox: [[UInt8]] = []
    func submit(_ batch: [UInt8]) -> SimSubmitResult { outbox.append(batch); return .accepted }
    func nextSessionEvent() -> SimSessionEvent? { inbox.isEmpty ? nil : .delivered(inbox.removeFirst()) }
    var memoryUse: [SimMemoryUse] { [] }
    func handleDatagram(_ datagram: [UInt8], now: Instant) { inbox.append(datagram) }
    func handleTimeout(now: Instant) {}
    func pollTransmit(now: Instant) -> [UInt8]? { outbox.isEmpty ? nil : outbox.removeFirst() }
    func pollTimeout() -> Instant? { nil }
}
