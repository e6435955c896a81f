import Glibc
import InkCodec

/// `inkwire-bench loss ...`: the packet-loss benchmark (issue 6). For each loss level and each
/// transport: a real relay process, members joined through the impaired link, every command's
/// latency from the drawer to each watcher. Prints a JSON line per (transport, loss), then a
/// markdown table and the target verdicts; writes them and one SVG CDF per loss level to --out.
/// SIGINT/SIGTERM end the run in progress cleanly and still report what was measured.
func runLossBench(_ arguments: [String]) -> Never {
    let options: LossBenchOptions
    do {
        options = try LossBenchOptions(arguments)
    } catch {
        lossBenchLog("inkwire-bench loss: \(error)\n\(LossBenchOptions.usage)")
        exit(64)
    }
    var traceBytes = lossBenchReadFile(options.tracePath)
    if traceBytes.isEmpty && !arguments.contains("--trace") {
        // From a git worktree one level further down, the shared folder is one more step up.
        traceBytes = lossBenchReadFile("../" + options.tracePath)
    }
    guard !traceBytes.isEmpty else {
        lossBenchLog("inkwire-bench loss: cannot read the trace \(options.tracePath)")
        exit(1)
    }
    let trace: [TraceLine]
    do {
        trace = try Trace.parse(traceBytes)
    } catch {
        lossBenchLog("inkwire-bench loss: \(options.tracePath): \(error)")
        exit(1)
    }
    signal(SIGINT) { _ in lossBenchStopRequested = 1 }
    signal(SIGTERM) { _ in lossBenchStopRequested = 1 }
    signal(SIGPIPE, SIG_IGN)
    let results = LossBench.run(options, trace: trace, binDirectory: lossBenchBinDirectory()) { line in
        print(line)
        fflush(nil)
    }
    let table = LossBenchReport.table(results)
    let verdicts = LossBench.verdicts(results, rttMilliseconds: options.rttMilliseconds)
    print("")
    print(table)
    print("")
    print(verdicts.joined(separator: "\n"))
    LossBench.write(results, table: table, verdicts: verdicts, options: options)
    exit(lossBenchStopRequested != 0 ? 130 : 0)
}

enum LossBench {
    /// Runs every (loss level, transport) of `options` in order, handing each JSON line to
    /// `emit` as soon as it is measured. Stops early (returning what it has) on SIGINT.
    static func run(_ options: LossBenchOptions, trace: [TraceLine], binDirectory: String,
                    emit: (String) -> Void = { _ in }) -> [LossRunResult] {
        let mode = options.link ?? (LossNetnsLink.isAvailable ? .netns : .proxy)
        var transports = options.transports
        if mode == .proxy {
            for skipped in transports where !skipped.isProxyImpairable {
                lossBenchLog("inkwire-bench loss: \(skipped.rawValue) skipped: the UDP proxy link cannot impair it "
                             + "(TCP must see packet loss, a tunnel's UDP must cross the link; run as root with --link netns)")
            }
            transports.removeAll { !$0.isProxyImpairable }
        }
        var results: [LossRunResult] = []
        let total = options.lossPercents.count * transports.count
        outer: for loss in options.lossPercents {
            for transport in transports {
                if lossBenchStopRequested != 0 { break outer }
                lossBenchLog("inkwire-bench loss: [\(results.count + 1)/\(total)] \(transport.rawValue) at \(LossBenchReport.number(loss)) % loss, "
                             + "\(options.rttMilliseconds) ms RTT, \(options.rooms) rooms x \(options.members) members, link \(mode.rawValue)")
                let scenario = LossScenario(transport: transport, lossPercent: loss, options: options, linkMode: mode, trace: trace,
                                            binDirectory: binDirectory, progress: { lossBenchLog("inkwire-bench loss: \($0)") })
                do {
                    let result = try scenario.run()
                    results.append(result)
                    emit(result.json)
                } catch {
                    lossBenchLog("inkwire-bench loss: \(transport.rawValue) at \(LossBenchReport.number(loss)) % failed: \(error)")
                }
            }
        }
        return results
    }

    /// The issue's targets, checked on what was measured (a missing row says so).
    static func verdicts(_ results: [LossRunResult], rttMilliseconds: Int) -> [String] {
        func row(_ transport: LossTransport, _ loss: Double) -> LossRunResult? {
            results.first { $0.transport == transport.rawValue && $0.lossPercent == loss && !$0.interrupted }
        }
        func ms(_ v: Double) -> String { LossBenchReport.number(v) }
        var lines: [String] = []
        if let udp = row(.inkwireUDP, 10) {
            let p99 = udp.percentileMs(0.99)
            if let tcp = row(.inkwireTCP, 10), tcp.link != "unimpaired" {
                let bound = tcp.percentileMs(0.99) / 3
                lines.append("target 10 % loss, inkwire-udp p99 <= inkwire-tcp p99 / 3: \(ms(p99)) <= \(ms(bound)) ms: \(p99 <= bound ? "met" : "MISSED")")
            } else {
                lines.append("target 10 % loss, inkwire-udp p99 <= inkwire-tcp p99 / 3: not measured (no impaired inkwire-tcp row)")
            }
            if let enet = row(.enet, 10) {
                let bound = enet.percentileMs(0.99)
                lines.append("target 10 % loss, inkwire-udp p99 < enet p99: \(ms(p99)) < \(ms(bound)) ms: \(p99 < bound ? "met" : "MISSED")")
            } else {
                lines.append("target 10 % loss, inkwire-udp p99 < enet p99: not measured (no enet row)")
            }
        } else {
            lines.append("targets at 10 % loss: not measured (no inkwire-udp row at 10 %)")
        }
        if let udp = row(.inkwireUDP, 10), let kcp = row(.kcptunFast3, 10) {
            let p99 = udp.percentileMs(0.99), bound = kcp.percentileMs(0.99) / 2
            let bytes = udp.wireBytesPerPoint, kcpBytes = kcp.wireBytesPerPoint
            lines.append("target 10 % loss, inkwire-udp p99 <= kcptun-fast3 p99 / 2: \(ms(p99)) <= \(ms(bound)) ms: \(p99 <= bound ? "met" : "MISSED")")
            lines.append("target 10 % loss, inkwire-udp wire B/point <= kcptun-fast3's: \(ms(bytes)) <= \(ms(kcpBytes)): \(bytes <= kcpBytes ? "met" : "MISSED")")
        } else if options(results).contains(.kcptunFast3) {
            lines.append("target 10 % loss against kcptun-fast3: not measured (no inkwire-udp or kcptun-fast3 row at 10 %)")
        }
        if let udp = row(.inkwireUDP, 0) {
            let bound = Double(rttMilliseconds) / 2 + Double(Batch.liveFlushMs) + 2
            let p50 = udp.percentileMs(0.5)
            lines.append("target 0 % loss, inkwire-udp p50 <= one-way + 60 ms batch + 2 ms: \(ms(p50)) <= \(ms(bound)) ms: \(p50 <= bound ? "met" : "MISSED")")
        } else {
            lines.append("target 0 % loss p50: not measured (no inkwire-udp row at 0 %)")
        }
        // A run cut by Ctrl-C is incomplete by construction; it says nothing about the transport.
        let incomplete = results.filter { !$0.isComplete && !$0.interrupted }
        func describe(_ r: LossRunResult) -> String {
            "\(r.transport) at \(ms(r.lossPercent)) %: \(LossBenchReport.number(r.completeness * 100, places: 3)) %"
                + (r.legacyWatchers > 0 ? " (legacy app \(LossBenchReport.number(r.legacyCompleteness * 100, places: 3)) %)" : "")
        }
        lines.append("target 100 % completeness everywhere: " + (results.isEmpty ? "not measured" : incomplete.isEmpty ? "met" : "MISSED ("
            + incomplete.map(describe).joined(separator: ", ") + ")"))
        return lines
    }

    /// The transports that have rows.
    private static func options(_ results: [LossRunResult]) -> [LossTransport] {
        results.compactMap { LossTransport(rawValue: $0.transport) }
    }

    /// Writes results.jsonl, results.md and cdf-loss-P.svg (one per loss level) to --out.
    static func write(_ results: [LossRunResult], table: String, verdicts: [String], options: LossBenchOptions) {
        let directory = options.outputDirectory
        guard lossBenchMakeDirectories(directory) else {
            lossBenchLog("inkwire-bench loss: cannot create \(directory)")
            return
        }
        var written: [String] = []
        func save(_ name: String, _ text: String) {
            let path = directory + "/" + name
            if lossBenchWriteFile(path, Array(text.utf8)) { written.append(path) } else { lossBenchLog("inkwire-bench loss: cannot write \(path)") }
        }
        save("results.jsonl", results.map { $0.json + "\n" }.joined())
        save("results.md", table + "\n\n" + verdicts.map { "- " + $0 }.joined(separator: "\n") + "\n")
        var levels: [Double] = []
        for r in results where !levels.contains(r.lossPercent) { levels.append(r.lossPercent) }
        for loss in levels {
            let svg = LossBenchReport.cdfSVG(lossPercent: loss, rttMilliseconds: options.rttMilliseconds,
                                             results.filter { $0.lossPercent == loss })
            let name = loss == loss.rounded() ? "\(Int(loss))" : LossBenchReport.number(loss, places: 2)
            save("cdf-loss-\(name).svg", svg)
        }
        lossBenchLog("inkwire-bench loss: wrote " + written.joined(separator: ", "))
    }
}

/// One line to stderr (progress and errors; stdout carries only results).
func lossBenchLog(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// `mkdir -p`.
func lossBenchMakeDirectories(_ path: String) -> Bool {
    var prefix = path.hasPrefix("/") ? "/" : ""
    for part in path.split(separator: "/") {
        prefix += part + "/"
        if mkdir(prefix, 0o755) != 0 && errno != EEXIST { return false }
    }
    return true
}

func lossBenchWriteFile(_ path: String, _ bytes: [UInt8]) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n <= 0 { return false }
        offset += n
    }
    return true
}
