import Glibc
import InkCodec
import Testing
@testable import inkwire_bench

/// The first `lines` lines of lesson-a.csv next to the package (or next to its worktree
/// directory), nil when absent.
private func lessonA(lines: Int) -> [TraceLine]? {
    let root = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/")
    for candidate in ["/../shared/traces/lesson-a.csv", "/../../shared/traces/lesson-a.csv"] {
        let bytes = lossBenchReadFile(root + candidate)
        guard !bytes.isEmpty else { continue }
        var end = 0, seen = 0
        while end < bytes.count && seen < lines {
            if bytes[end] == UInt8(ascii: "\n") { seen += 1 }
            end += 1
        }
        return try? Trace.parse(Array(bytes[..<end]))
    }
    return nil
}

/// The loss harness end to end, small: a real inkwired and the real ENet relay process, one room
/// of three members through the in-process UDP proxy at 0 % and 10 % loss. Every command reaches
/// both watchers exactly once, in order, and each JSON line has the fields the docs promise.
@Test func lossHarnessDeliversEverythingAndReportsItsFields() throws {
    // About the first 40 s of the lesson: the room's slice starts at its first stroke.
    guard let trace = lessonA(lines: 1000) else {
        print("LossBenchTests: ../shared/traces/lesson-a.csv not found; skipped")
        return
    }
    let binDirectory = lossBenchBinDirectory()
    guard access(binDirectory + "/inkwired", X_OK) == 0, access(binDirectory + "/inkwire-bench", X_OK) == 0 else {
        print("LossBenchTests: inkwired or inkwire-bench not built next to the tests; skipped")
        return
    }
    var options = LossBenchOptions()
    options.lossPercents = [0, 10]
    options.rooms = 1
    options.members = 3
    options.durationSeconds = 1
    options.transports = [.inkwireUDP, .enet]
    options.link = .proxy
    options.seed = 7
    options.drainTimeoutSeconds = 20
    let results = LossBench.run(options, trace: trace, binDirectory: binDirectory)

    #expect(results.map { "\($0.transport)@\(Int($0.lossPercent))" } == ["inkwire-udp@0", "enet@0", "inkwire-udp@10", "enet@10"],
            "seed \(options.seed)")
    for result in results {
        #expect(result.completeness == 1.0, "seed \(options.seed): \(result.json)")
        #expect(result.violations == 0, "seed \(options.seed): \(result.json)")
        #expect(result.expected == result.commandsSent * 2, "seed \(options.seed): \(result.json)")
        #expect(result.commandsSent > 0 && result.latencies.count == result.expected, "seed \(options.seed): \(result.json)")
        #expect(result.link == "proxy" && result.wireBytes > 0 && result.pointsDelivered > 0, "seed \(options.seed): \(result.json)")
        for field in ["\"transport\":", "\"loss_percent\":", "\"p50_ms\":", "\"p99_ms\":", "\"p999_ms\":", "\"max_ms\":",
                      "\"completeness\":1,", "\"wire_bytes_per_point\":", "\"daemon_cpu_s\":", "\"daemon_rss_mb\":",
                      "\"rtt_ms\":40,", "\"rooms\":1,", "\"members\":3,", "\"seed\":7,", "\"link\":\"proxy\""] {
            #expect(result.json.contains(field), "seed \(options.seed): \(field) missing from \(result.json)")
        }
    }
    let table = LossBenchReport.table(results)
    #expect(table.split(separator: "\n").count == 2 + results.count)
    let svg = LossBenchReport.cdfSVG(lossPercent: 10, rttMilliseconds: 40, results.filter { $0.lossPercent == 10 })
    #expect(svg.hasPrefix("<svg") && svg.contains("inkwire-udp") && svg.contains("enet") && svg.hasSuffix("</svg>\n"))
}

@Test func lossOptionsRejectBadValuesWithAMessage() {
    #expect(throws: LossBenchOptions.Invalid.self) { try LossBenchOptions(["--loss-percent", "5,101"]) }
    #expect(throws: LossBenchOptions.Invalid.self) { try LossBenchOptions(["--transports", "udp"]) }
    #expect(throws: LossBenchOptions.Invalid.self) { try LossBenchOptions(["--members", "1"]) }
    #expect(throws: LossBenchOptions.Invalid.self) { try LossBenchOptions(["--link", "tun"]) }
    let parsed = try? LossBenchOptions(["--loss-percent", "0,2.5", "--rooms", "3", "--transports", "enet,inkwire-udp", "--link", "proxy"])
    #expect(parsed?.lossPercents == [0, 2.5])
    #expect(parsed?.rooms == 3)
    #expect(parsed?.transports == [.enet, .inkwireUDP])
    #expect(parsed?.link == .proxy)
}

/// Nearest-rank percentiles on a known set: 1...1000 ms.
@Test func lossPercentilesAreNearestRank() {
    var result = LossRunResult(transport: "x", lossPercent: 0, rttMilliseconds: 40, rooms: 1, members: 2, seed: 1, link: "proxy",
                               durationSeconds: 1)
    result.latencies = (1...1000).map { UInt32($0 * 1000) }
    #expect(result.percentileMs(0.5) == 500)
    #expect(result.percentileMs(0.99) == 990)
    #expect(result.percentileMs(0.999) == 999)
    #expect(result.percentileMs(1) == 1000)
}
