import Glibc
import Testing
@testable import inkwire_bench

/// Whether the `inkwired` next to the tests knows `--bridge` (its `--help` lists it).
private func daemonHasBridge() -> Bool {
    let output = "/tmp/inkwire-bench-test-help-\(getpid()).txt"
    defer { unlink(output) }
    let fd = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    guard let pid = try? ChildProcess.spawn([FanoutDaemon.binaryPath, "--help"], environment: nil, stdout: fd, stderr: fd) else { return false }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return FanoutDaemon.read(output)?.contains("--bridge") ?? false
}

/// The bridge harness end to end: a real mosquitto, two real inkwired bridged through it and
/// the chaos proxy, one room of three members (drawer on daemon 0, a watcher on each daemon):
/// every watcher gets every batch exactly once in room order, both kinds of latency are
/// measured, and the JSON line carries the promised fields. Skips without mosquitto or a
/// daemon that bridges.
@Test func bridgeSmokeRunDeliversOverTheBrokerAndReports() throws {
    guard BridgeBroker.isInstalled, daemonHasBridge() else { return }
    var options = try BridgeOptions(["--daemons", "2", "--rooms", "1", "--members", "3", "--duration", "1.5", "--warmup", "0.3",
                                     "--chaos", "--seed", "5", "--tap"])
    options.quiet = true
    let result = bridgeOnce(options, lines: FanoutWorkload.syntheticLines()) { _ in }
    #expect(result.failure == nil, "seed 5: \(result.failure ?? "")")
    #expect(result.completeness == 1.0 && result.errors == 0 && result.unacknowledgedDrawers == 0, "seed 5: \(result.json)")
    #expect(result.batches > 0 && result.deliveries == result.batches * 2, "seed 5: \(result.json)")
    #expect(result.local.count > 0 && result.remote.count > 0, "seed 5: \(result.json)")
    #expect((result.proxyToBroker?.publishes ?? 0) > 0 && (result.proxyToDaemons?.publishes ?? 0) > 0, "seed 5")
    // The tap timed every leg of the hop (home, broker, follower) for the remote deliveries.
    #expect(result.legs.map(\.0) == ["home", "broker", "follower"] && result.legs.allSatisfy { $0.1.count > 0 }, "seed 5: \(result.json)")
    for field in ["local_p50_ms", "remote_p99_ms", "hop_p50_ms", "completeness", "bridge_metrics", "proxy_broker_to_daemons", "home_leg_p50_ms"] {
        #expect(result.json.contains("\"\(field)\":"), "\(field) missing in \(result.json)")
    }
    #expect(result.json.hasPrefix("{\"bench\":\"bridge\",\"daemons\":2,\"rooms\":1,\"members\":3,"))
}

@Test func bridgeOptionsParseChaosAndRejectNonsense() throws {
    let options = try BridgeOptions(["--daemons", "3", "--rooms", "10", "--members", "30", "--chaos-jitter-ms", "20"])
    #expect(options.shape.daemons == 3 && options.shape.rooms == 10 && options.shape.members == 30)
    #expect(options.chaos?.jitterMicroseconds == 20_000 && options.chaos?.delayMicroseconds == 1000)
    #expect(try BridgeOptions([]).chaos == nil)
    #expect(throws: FanoutUsage.self) { try BridgeOptions(["--daemons", "0"]) }
    #expect(throws: FanoutUsage.self) { try BridgeOptions(["--bogus"]) }
    // Watchers spread over every daemon; the drawer of room r on daemon r % N.
    let shape = options.shape
    #expect((0..<29).map(shape.watcherDaemon).filter { $0 == 0 }.count == 10)
    #expect(shape.drawerDaemon(room: 4) == 1)
}

@Test func metricsTextSumsCountersAndTakesTheLargestGauge() {
    let text = """
        # HELP inkwire_bridge_reorder_depth Deepest reorder buffer.
        inkwire_bridge_reorder_depth{room="a"} 3
        inkwire_bridge_reorder_depth{room="b"} 4
        inkwire_bridge_gap_requests_total 2
        inkwire_rooms 7
        """
    let samples = BridgeMetricsScrape.parse(text, filter: "bridge")
    #expect(samples == ["inkwire_bridge_reorder_depth": 4, "inkwire_bridge_gap_requests_total": 2])
}
