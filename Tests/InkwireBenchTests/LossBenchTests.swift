import Foundation
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

/// The kcptun path end to end: a real inkwired, Debian's kcptun (a client per member and for the
/// legacy app, a server per relay port) in the packet link's namespaces, fast3 with FEC as
/// shipped, 10 % loss each way. Every command reaches both native watchers, and every point,
/// undo, redo and clear the legacy app, exactly once and in order; the relay's CPU counts the
/// kcptun servers and the legacy tunnel's bytes are kept apart. Needs root and network
/// namespaces (as the packet link tests) and kcptun; returns at once without them.
@Test func kcptunPathDeliversAShortLessonCompletely() throws {
    guard packetLinkAvailable else {
        print("LossBenchTests: no root with CAP_NET_ADMIN/CAP_SYS_ADMIN, /dev/net/tun or ip; kcptun path skipped")
        return
    }
    guard KCPTunProfile.isInstalled else {
        print("LossBenchTests: kcptun-client/kcptun-server not installed (apt-get install kcptun); kcptun path skipped")
        return
    }
    guard let trace = lessonA(lines: 1000) else {
        print("LossBenchTests: ../shared/traces/lesson-a.csv not found; kcptun path skipped")
        return
    }
    let binDirectory = lossBenchBinDirectory()
    guard access(binDirectory + "/inkwired", X_OK) == 0 else {
        print("LossBenchTests: inkwired not built next to the tests; kcptun path skipped")
        return
    }
    var options = LossBenchOptions()
    options.lossPercents = [10]
    options.rooms = 1
    options.members = 3
    options.durationSeconds = 3
    options.transports = [.kcptunFast3]
    options.link = .netns
    options.seed = 5
    options.drainTimeoutSeconds = 20
    let results = LossBench.run(options, trace: trace, binDirectory: binDirectory)

    #expect(results.count == 1, "seed \(options.seed)")
    for result in results {
        #expect(result.transport == "kcptun-fast3" && result.link == "netns", "seed \(options.seed): \(result.json)")
        #expect(result.completeness == 1.0 && result.violations == 0, "seed \(options.seed): \(result.json)")
        #expect(result.commandsSent > 0 && result.expected == result.commandsSent * 2, "seed \(options.seed): \(result.json)")
        #expect(result.legacyWatchers == 1 && result.legacyExpected > 0, "seed \(options.seed): \(result.json)")
        #expect(result.legacyCompleteness == 1.0 && result.legacyViolations == 0, "seed \(options.seed): \(result.json)")
        #expect(result.isComplete, "seed \(options.seed): \(result.json)")
        #expect(result.tunnelServers == 2 && result.tunnelClients == 4, "seed \(options.seed): \(result.json)")
        #expect((result.tunnelServerCPUSeconds ?? 0) > 0 && result.daemonCPUSeconds >= result.tunnelServerCPUSeconds ?? 0,
                "seed \(options.seed): \(result.json)")
        #expect(result.wireBytes > 0 && result.legacyWireBytes > 0, "seed \(options.seed): \(result.json)")
        for field in ["\"kcptun_server_cpu_s\":", "\"kcptun_client_cpu_s\":", "\"legacy_p99_ms\":", "\"legacy_completeness\":1,",
                      "\"legacy_wire_bytes\":", "\"wire_bytes_per_point\":"] {
            #expect(result.json.contains(field), "seed \(options.seed): \(field) missing from \(result.json)")
        }
    }
    // Nothing of the run is left behind: its namespaces and its kcptun processes are gone.
    let left = (try? FileManager.default.contentsOfDirectory(atPath: NetworkNamespace.directory)) ?? []
    #expect(!left.contains { $0.hasPrefix("inkwloss-\(getpid())-") }, "seed \(options.seed): \(left)")
}

@Test func lossOptionsNameTheKCPTunTransports() throws {
    let parsed = try LossBenchOptions(["--transports", "inkwire-udp,kcptun-fast3,kcptun-fast2,kcptun-fast3-nofec,kcptun-fast2-nofec"])
    #expect(parsed.transports == [.inkwireUDP, .kcptunFast3, .kcptunFast2, .kcptunFast3NoFEC, .kcptunFast2NoFEC])
    #expect(LossTransport.kcptunFast3.kcptun == KCPTunProfile(mode: "fast3", forwardErrorCorrection: true))
    #expect(LossTransport.kcptunFast2NoFEC.kcptun?.sharedFlags.contains("--datashard") == true)
    #expect(!LossTransport.kcptunFast2.isProxyImpairable && LossTransport.kcptunFast2.kcptun?.mode == "fast2")
    #expect(LossTransport.inkwireUDP.kcptun == nil)
}
