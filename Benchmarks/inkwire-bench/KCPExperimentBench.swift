import Foundation
import InkProtocol
import InkSim

/// `inkwire-bench kcp-experiment [--seeds 1-50] [--loss-percent 5] [--kcp-modes normal,fast]`
///
/// KCP's latency experiment (docs/notes/kcp-experiment.md) with two Inkwire sessions, one run
/// per seed (`srand(seed)`), and the same experiment with the real C KCP in each of
/// `--kcp-modes` (test.cpp's "normal" and "fast" by default, "none" for none), driven by
/// `Benchmarks/kcp-experiment/kcp_experiment.py` over the same link model and seeds
/// (`KCPExperimentKCP`). `--loss-percent` is the loss per direction (KCP's `lostrate / 2`; the
/// experiment's default `lostrate 10` gives 5); 0 gives the loss-free floor.
/// `--endpoint passthrough` replaces the sessions with no ARQ at all (the link's own floor).
/// Prints one JSON line per row, then a table; the figures KCP's experiment is quoted with
/// (docs/notes/kcp-experiment.md) follow as a cross-check of the measured KCP rows.
func runKCPExperiment(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "kcp-experiment", usage: kcpExperimentUsage,
                                options: ["--seeds", "--loss-percent", "--endpoint", "--kcp-modes", "--python", "--kcp-driver"])
    var seeds = Array(1 ... 50)
    if let text = cli.text("--seeds") {
        guard let parsed = parseSeedList(text) else { cli.fail("--seeds takes numbers and ranges such as 1-50 or 1,3,5, got '\(text)'") }
        seeds = parsed
    }
    let lossPercent = cli.integer("--loss-percent", 0...100, default: KCPLatencySimulator.defaultLossPercent)
    let endpointKind = cli.text("--endpoint") ?? "arq"
    guard ["arq", "passthrough"].contains(endpointKind) else { cli.fail("--endpoint takes arq or passthrough, got '\(endpointKind)'") }
    var kcpModes = KCPExperimentKCP.defaultModes
    if let text = cli.text("--kcp-modes") {
        let modes = text == "none" ? [] : text.split(separator: ",").map(String.init)
        guard text == "none" || (!modes.isEmpty && modes.allSatisfy(KCPExperimentKCP.modes.contains)) else {
            cli.fail("--kcp-modes takes default, normal, fast (comma-separated) or none, got '\(text)'")
        }
        kcpModes = modes
    }
    let python = cli.text("--python") ?? "python3"
    guard !python.isEmpty else { cli.fail("--python needs a program") }
    let driver = cli.text("--kcp-driver") ?? KCPExperimentKCP.defaultDriverPath
    guard !driver.isEmpty else { cli.fail("--kcp-driver needs a path") }

    var results: [KCPExperiment.Result] = []
    var statsA: [ARQStats] = []
    var statsB: [ARQStats] = []
    for seed in seeds {
        var pair: (ARQSession, ARQSession)? = nil
        results.append(KCPExperiment.run(seed: UInt32(truncatingIfNeeded: seed), lossPercent: lossPercent) { t0 in
            if endpointKind == "passthrough" { return (PassThroughSession(), PassThroughSession()) }
            let p = (ARQSession(now: t0), ARQSession(now: t0))
            pair = p
            return p
        })
        if let pair {
            statsA.append(pair.0.stats)
            statsB.append(pair.1.stats)
        }
    }
    let inkwire = KCPExperimentSummary(results)
    func perSeed(_ s: [ARQStats], _ f: (ARQStats) -> Int) -> Double {
        s.isEmpty ? 0 : (Double(s.map(f).reduce(0, +)) / Double(s.count) * 10).rounded() / 10
    }
    let targets = inkwire.averageRTT <= 108 && inkwire.maxRTT <= 250 && inkwire.p99 <= 200 && inkwire.bytesA <= 60_761 && inkwire.inOrder
    print(inkwire.json(endpoint: endpointKind, seeds: seeds, lossPercent: lossPercent, extra: [
        ("retransmissions_a", "\(perSeed(statsA, \.retransmissions))"), ("retransmissions_b", "\(perSeed(statsB, \.retransmissions))"),
        ("redundant_segments_a", "\(perSeed(statsA, \.redundantSegments))"), ("redundant_segments_b", "\(perSeed(statsB, \.redundantSegments))"),
        ("pure_acks_a", "\(perSeed(statsA, \.pureAcksSent))"), ("probes_a", "\(perSeed(statsA, \.probesSent))"),
        ("targets_met", "\(lossPercent == 5 ? "\(targets)" : "null")"),
    ]))

    // The real KCP, same link model, same seeds.
    var kcpRows: [(mode: String, summary: KCPExperimentSummary)] = []
    var kcpProblems: [String] = []
    for mode in kcpModes {
        do {
            let run = try KCPExperimentKCP.run(mode: mode, seeds: seeds, lossPercent: lossPercent, python: python, driver: driver)
            let summary = KCPExperimentSummary(run.map(\.result))
            kcpRows.append((mode, summary))
            print(summary.json(endpoint: "kcp-\(mode)", seeds: seeds, lossPercent: lossPercent,
                               extra: [("kcp", "\"\(run.first?.kcp ?? "?")\"")]))
        } catch {
            kcpProblems.append("KCP \(mode) not measured: \(error)")
            if !error.isMissing { break }
        }
    }

    func row(_ cells: [String]) -> String { "| " + cells.joined(separator: " | ") + " |" }
    func cells(_ label: String, _ s: KCPExperimentSummary) -> [String] {
        [label, "\(s.averageRTT)", "\(s.maxRTT)", "\(s.p50) / \(s.p95) / \(s.p99)", "\(s.datagramsA)", "\(s.bytesA)"]
    }
    print("")
    print(row(["mode", "avgrtt", "maxrtt", "p50 / p95 / p99", "datagrams A->link", "bytes A->link"]))
    print(row(["---", "---", "---", "---", "---", "---"]))
    print(row(cells("Inkwire \(endpointKind), \(lossPercent) % loss", inkwire)))
    for (mode, summary) in kcpRows {
        print(row(cells("KCP \(mode) (measured: C KCP), \(lossPercent) % loss", summary)))
    }
    // The published figures (seeds 1-50), to check the measured rows against, not to compare with.
    if lossPercent == 5 {
        print(row(["KCP normal, quoted (seeds 1-50)", "157.2", "586", "121 / 308 / 479", "1292", "58809"]))
        print(row(["KCP fast, quoted (seeds 1-50)", "138.2", "420", "113 / 241 / 337", "1331", "60761"]))
        print(row(["target (5 % loss)", "<= 108", "<= 250", "p99 <= 200", "", "<= 60761"]))
    } else if lossPercent == 0 {
        print(row(["KCP loss-free floor, quoted (seeds 1-50)", "98.4", "132", "99 / 120 / 127", "", ""]))
    }
    for problem in kcpProblems { print(problem) }
    if !inkwire.failing.isEmpty { print("seeds with missing or out-of-order echoes: \(inkwire.failing)") }
    for (mode, summary) in kcpRows where !summary.failing.isEmpty {
        print("KCP \(mode): seeds with missing or out-of-order echoes: \(summary.failing)")
    }
    exit(inkwire.inOrder ? 0 : 1)
}

/// One row of the experiment: means over seeds (as KCP reports), percentiles pooled over every
/// echo of every seed (nearest rank).
struct KCPExperimentSummary {
    var averageRTT: Double
    var maxRTT: Double
    var p50: Int, p95: Int, p99: Int
    var datagramsA: Double, bytesA: Double, datagramsB: Double, bytesB: Double
    /// Echoes slower than the link's slowest loss-free round trip (2 x 61 ms): they needed a
    /// recovery of some kind.
    var lateShare: Double
    var inOrder: Bool
    var failing: [UInt32]

    init(_ results: [KCPExperiment.Result]) {
        let n = Double(max(results.count, 1))
        let pooled = results.flatMap(\.rtts).sorted()
        func mean(_ f: (KCPExperiment.Result) -> Int) -> Double { (Double(results.map(f).reduce(0, +)) / n * 10).rounded() / 10 }
        func percentile(_ p: Int) -> Int {
            guard !pooled.isEmpty else { return 0 }
            let rank = (p * pooled.count + 99) / 100  // nearest rank
            return Int(pooled[max(rank, 1) - 1])
        }
        averageRTT = mean(\.averageRTT)
        maxRTT = mean(\.maxRTT)
        p50 = percentile(50)
        p95 = percentile(95)
        p99 = percentile(99)
        datagramsA = mean(\.a.datagrams)
        bytesA = mean(\.a.bytes)
        datagramsB = mean(\.b.datagrams)
        bytesB = mean(\.b.bytes)
        let slowest = 2 * (KCPLatencySimulator.minimumDelayMs + UInt64(KCPLatencySimulator.delaySpreadMs) - 1)
        lateShare = pooled.isEmpty ? 0 : Double(pooled.filter { UInt64($0) > slowest }.count) / Double(pooled.count)
        inOrder = !results.isEmpty && results.allSatisfy { $0.inOrder && $0.complete }
        failing = results.filter { !($0.inOrder && $0.complete) }.map(\.seed)
    }

    func json(endpoint: String, seeds: [Int], lossPercent: Int, extra: [(String, String)]) -> String {
        let fields: [(String, String)] = [
            ("bench", "\"kcp-experiment\""), ("endpoint", "\"\(endpoint)\""),
            ("seeds", "\"\(seeds.first ?? 0)-\(seeds.last ?? 0)\""), ("seed_count", "\(seeds.count)"),
            ("loss_percent", "\(lossPercent)"), ("avgrtt", "\(averageRTT)"), ("maxrtt", "\(maxRTT)"),
            ("p50", "\(p50)"), ("p95", "\(p95)"), ("p99", "\(p99)"),
            ("datagrams_a", "\(datagramsA)"), ("bytes_a", "\(bytesA)"),
            ("datagrams_b", "\(datagramsB)"), ("bytes_b", "\(bytesB)"),
            ("late_share", "\((lateShare * 10000).rounded() / 10000)"),
            ("in_order", "\(inOrder)"), ("failed_seeds", "[\(failing.map(String.init).joined(separator: ","))]"),
        ] + extra
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
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

private let kcpExperimentUsage = "usage: inkwire-bench kcp-experiment [--seeds 1-50] [--loss-percent 5] [--endpoint arq|passthrough] "
    + "[--kcp-modes normal,fast|none] [--python python3] [--kcp-driver Benchmarks/kcp-experiment/kcp_experiment.py]"

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
