import Glibc
import InkBenchSupport
import InkCodec
import InkUV
import MQTTChaos

/// `inkwire-bench bridge --daemons 3 --rooms 10 --members 30 [--duration 30] [--warmup 2]
/// [--trace PATH] [--chaos [--chaos-delay-ms 1] [--chaos-jitter-ms 15] [--chaos-duplicate-percent 5]
/// [--chaos-burst-percent 2] [--chaos-burst-max 6]] [--seed S] [--topic-prefix P] [--daemon-arg A]...`
///
/// Starts a real `mosquitto` on a free loopback port and N real `inkwired` (release, next to
/// this executable) each with `--bridge` to it (through the in-process MQTT chaos proxy with
/// `--chaos`). Per room one drawer on daemon `room % N` plays the lesson at lesson rate in 60 ms
/// batches; the other members watch, spread over every daemon. Reports the delivery latency of
/// watchers on the drawer's daemon (local) and on the others (remote: through the broker), the
/// difference (what the hop adds), completeness, and the daemons' bridge metrics (reorder depth).
struct BridgeOptions {
    var shape = BridgeShape()
    var tracePath: String?
    var chaos: MQTTChaosConfiguration?
    var seed: UInt64 = 1
    var topicPrefix: String?
    var daemonArguments: [String] = []
    var quiet = false
    /// Daemons without `--bridge` (checks the harness; with one daemon, the unbridged baseline).
    var noBridge = false
    /// mosquitto with `set_tcp_nodelay true` (Nagle off on the broker's sockets).
    var brokerNoDelay = false
    /// Route the daemons through the MQTT proxy (quiet unless `--chaos`) and split the hop into
    /// home, broker and follower legs.
    var tap = false

    static let usage = """
        usage: inkwire-bench bridge [--daemons 3] [--rooms 10] [--members 30] [--duration 30] [--warmup 2]
          [--trace PATH] [--chaos [--chaos-delay-ms 1] [--chaos-jitter-ms 15] [--chaos-duplicate-percent 5]
          [--chaos-burst-percent 2] [--chaos-burst-max 6]] [--seed 1] [--topic-prefix P] [--daemon-arg ARG]... [--quiet] [--no-bridge] [--broker-nodelay] [--tap]
        """

    init(_ arguments: [String]) throws(FanoutUsage) {
        var i = 0
        var chaosOn = false
        var delay = 1.0, jitter = 15.0, duplicate = 5.0, burst = 2.0, burstMax = 6.0
        func value() throws(FanoutUsage) -> String {
            guard i + 1 < arguments.count else { throw FanoutUsage("\(arguments[i]) needs a value") }
            i += 1
            return arguments[i]
        }
        func number(_ range: ClosedRange<Double>) throws(FanoutUsage) -> Double {
            let name = arguments[i]
            let text = try value()
            guard let v = Double(text), range.contains(v) else { throw FanoutUsage("bad \(name) \(text)") }
            return v
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--daemons": shape.daemons = Int(try number(1...64))
            case "--rooms": shape.rooms = Int(try number(1...10_000))
            case "--members": shape.members = Int(try number(2...65_536))
            case "--duration": shape.durationSeconds = try number(0.1...86_400)
            case "--warmup": shape.warmupSeconds = try number(0...600)
            case "--sessions-per-socket": shape.sessionsPerSocket = Int(try number(1...100_000))
            case "--trace": tracePath = try value()
            case "--chaos": chaosOn = true
            case "--chaos-delay-ms": delay = try number(0...60_000); chaosOn = true
            case "--chaos-jitter-ms": jitter = try number(0...60_000); chaosOn = true
            case "--chaos-duplicate-percent": duplicate = try number(0...100); chaosOn = true
            case "--chaos-burst-percent": burst = try number(0...100); chaosOn = true
            case "--chaos-burst-max": burstMax = try number(2...1024); chaosOn = true
            case "--seed": seed = UInt64(try number(0...1e15))
            case "--topic-prefix": topicPrefix = try value()
            case "--daemon-arg": daemonArguments.append(try value())
            case "--quiet": quiet = true
            case "--no-bridge": noBridge = true
            case "--broker-nodelay": brokerNoDelay = true
            case "--tap": tap = true
            default: throw FanoutUsage("unknown argument \(arguments[i])")
            }
            i += 1
        }
        if chaosOn {
            chaos = MQTTChaosConfiguration(delayMicroseconds: UInt64(delay * 1000), jitterMicroseconds: UInt64(jitter * 1000),
                                           duplicateChance: duplicate / 100, burstChance: burst / 100, maximumBurstLength: Int(burstMax))
        }
    }
}

/// What one bridge run measured.
struct BridgeResult {
    var shape: BridgeShape
    var chaos: MQTTChaosConfiguration?
    var seed: UInt64 = 1
    var local = BridgeLatency()
    var remote = BridgeLatency()
    var completeness = 0.0
    var deliveries = 0
    var batches = 0
    var errors = 0
    var unacknowledgedDrawers = 0
    var joinSeconds = 0.0
    var daemonCPUPercent = 0.0
    /// Bridge metrics over the daemons: `_total` counters summed, gauges the largest.
    var bridgeMetrics: [(String, Double)] = []
    var proxyToBroker: MQTTChaosCounters?
    var proxyToDaemons: MQTTChaosCounters?
    /// `--tap`: the hop's legs (home, broker, follower).
    var legs: [(String, BridgeLatency)] = []
    var failure: String?

    /// Remote minus local, nil unless both kinds of watcher had samples.
    var hopP50Ms: Double? { local.count > 0 && remote.count > 0 ? remote.p50 - local.p50 : nil }
    var hopP99Ms: Double? { local.count > 0 && remote.count > 0 ? remote.p99 - local.p99 : nil }

    var json: String {
        var fields: [(String, String)] = [
            ("bench", "\"bridge\""), ("daemons", "\(shape.daemons)"), ("rooms", "\(shape.rooms)"), ("members", "\(shape.members)"),
            ("duration_s", fanoutFixed(shape.durationSeconds, 1)), ("seed", "\(seed)"), ("chaos", chaos == nil ? "false" : "true"),
            ("local_p50_ms", fanoutFixed(local.p50, 2)), ("local_p99_ms", fanoutFixed(local.p99, 2)), ("local_max_ms", fanoutFixed(local.max, 2)),
            ("remote_p50_ms", fanoutFixed(remote.p50, 2)), ("remote_p99_ms", fanoutFixed(remote.p99, 2)), ("remote_max_ms", fanoutFixed(remote.max, 2)),
            ("hop_p50_ms", hopP50Ms.map { fanoutFixed($0, 2) } ?? "null"), ("hop_p99_ms", hopP99Ms.map { fanoutFixed($0, 2) } ?? "null"),
            ("local_samples", "\(local.count)"), ("remote_samples", "\(remote.count)"),
            ("completeness", fanoutFixed(completeness, 6)), ("deliveries", "\(deliveries)"), ("batches", "\(batches)"),
            ("errors", "\(errors)"), ("unacknowledged_drawers", "\(unacknowledgedDrawers)"), ("join_s", fanoutFixed(joinSeconds, 2)),
            ("daemon_cpu_percent", fanoutFixed(daemonCPUPercent, 1)),
            ("bridge_metrics", "{" + bridgeMetrics.map { "\"\($0.0)\":\(fanoutFixed($0.1, 3))" }.joined(separator: ",") + "}"),
        ]
        if let c = chaos {
            fields.append(("chaos_settings", "{\"delay_ms\":\(Double(c.delayMicroseconds) / 1000),\"jitter_ms\":\(Double(c.jitterMicroseconds) / 1000),"
                + "\"duplicate_percent\":\(c.duplicateChance * 100),\"burst_percent\":\(c.burstChance * 100),\"burst_max\":\(c.maximumBurstLength)}"))
        }
        if let up = proxyToBroker, let down = proxyToDaemons {
            fields.append(("proxy_daemons_to_broker", up.json))
            fields.append(("proxy_broker_to_daemons", down.json))
        }
        for (name, leg) in legs {
            fields.append(("\(name)_leg_p50_ms", fanoutFixed(leg.p50, 2)))
            fields.append(("\(name)_leg_p99_ms", fanoutFixed(leg.p99, 2)))
        }
        if let failure { fields.append(("failure", "\"\(failure.filter { $0 != "\"" && $0 != "\\" && $0 != "\n" })\"")) }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    var table: String {
        var lines = [
            "| watchers | samples | p50 ms | p99 ms | max ms |", "| --- | --- | --- | --- | --- |",
            "| on the drawer's daemon (local) | \(local.count) | \(fanoutFixed(local.p50, 2)) | \(fanoutFixed(local.p99, 2)) | \(fanoutFixed(local.max, 2)) |",
            "| on other daemons (via broker) | \(remote.count) | \(fanoutFixed(remote.p50, 2)) | \(fanoutFixed(remote.p99, 2)) | \(fanoutFixed(remote.max, 2)) |",
            "| broker hop adds | | \(hopP50Ms.map { fanoutFixed($0, 2) } ?? "-") | \(hopP99Ms.map { fanoutFixed($0, 2) } ?? "-") | |",
            "",
            "completeness \(fanoutFixed(completeness, 6)), \(batches) batches, \(deliveries) deliveries, \(errors) errors, "
                + "daemons' CPU \(fanoutFixed(daemonCPUPercent, 1)) % of one core",
        ]
        if !legs.isEmpty {
            lines.append("hop legs (p50 / p99 ms): " + legs.map { "\($0.0) \(fanoutFixed($0.1.p50, 2)) / \(fanoutFixed($0.1.p99, 2))" }.joined(separator: ", "))
        }
        for (name, value) in bridgeMetrics { lines.append("  \(name) \(fanoutFixed(value, 3))") }
        if let up = proxyToBroker, let down = proxyToDaemons {
            lines.append("chaos proxy: daemons -> broker \(up.publishes) publishes, \(up.duplicated) duplicated, max overtaken \(up.maximumOvertakenDepth); "
                + "broker -> daemons \(down.publishes) publishes, \(down.duplicated) duplicated, max overtaken \(down.maximumOvertakenDepth)")
        }
        if let failure { lines.append("FAILED: \(failure)") }
        return lines.joined(separator: "\n")
    }
}

func runBridgeBench(_ arguments: [String]) -> Never {
    let options: BridgeOptions
    do { options = try BridgeOptions(arguments) } catch {
        print("inkwire-bench bridge: \(error)")
        print(BridgeOptions.usage)
        exit(2)
    }
    let lines: [TraceLine]
    if let path = options.tracePath {
        guard let text = FanoutDaemon.read(path), let parsed = try? Trace.parse(Array(text.utf8)) else {
            print("inkwire-bench bridge: cannot read the trace \(path)")
            exit(2)
        }
        lines = parsed
    } else {
        lines = FanoutWorkload.syntheticLines()
    }
    raiseDescriptorLimit()
    let result = bridgeOnce(options, lines: lines) { line in if !options.quiet { fanoutLog("bridge: \(line)\n") } }
    print(result.json)
    print("")
    print(result.table)
    exit(result.failure == nil ? 0 : 1)
}

/// Broker, proxy (with chaos), daemons, load; everything stopped before returning.
func bridgeOnce(_ options: BridgeOptions, lines: [TraceLine], progress: (String) -> Void) -> BridgeResult {
    let shape = options.shape
    var result = BridgeResult(shape: shape, chaos: options.chaos, seed: options.seed)
    guard BridgeBroker.isInstalled else {
        result.failure = "mosquitto is not installed (\(BridgeBroker.binaryPath))"
        return result
    }
    let broker: BridgeBroker
    do { broker = try BridgeBroker(noDelay: options.brokerNoDelay) } catch {
        result.failure = "\(error)"
        return result
    }
    defer { broker.stop() }
    let loop: EventLoop
    do { loop = try EventLoop() } catch {
        result.failure = "\(error)"
        return result
    }
    defer { loop.shutdown() }
    var brokerAddress = SocketAddress.loopbackIPv4(port: broker.port)
    var proxy: MQTTChaosProxy?
    if options.chaos != nil || options.tap {
        do {
            let created = try MQTTChaosProxy(loop: loop, listen: .loopbackIPv4(port: 0), forward: brokerAddress,
                                             configuration: options.chaos ?? MQTTChaosConfiguration(), seed: options.seed)
            proxy = created
            if let address = created.listenAddress { brokerAddress = address }
        } catch {
            result.failure = "chaos proxy: \(error)"
            return result
        }
    }
    defer { proxy?.close() }
    let prefix = options.topicPrefix ?? "inkwire-bench-\(getpid())"
    progress("mosquitto on 127.0.0.1:\(broker.port)" + (proxy == nil ? "" : ", daemons through the chaos proxy on \(brokerAddress)"))

    var daemons: [FanoutDaemon] = []
    defer { for d in daemons { d.stop(keepLog: result.failure != nil) } }
    for index in 0..<shape.daemons {
        do {
            daemons.append(try FanoutDaemon(
                sessions: shape.rooms * shape.members, rooms: shape.rooms, members: shape.members,
                extraArguments: (options.noBridge ? [] : ["--bridge", "mqtt://\(brokerAddress)", "--bridge-topic-prefix", prefix])
                    + ["--metrics", "127.0.0.1:0"] + options.daemonArguments))
        } catch {
            result.failure = "daemon \(index): \(error)"
            return result
        }
    }
    progress("inkwired pids \(daemons.map(\.pid)) on \(daemons.map { "\($0.udp)" })")

    let lessonSeconds = Double(lines.last?.timeMs ?? 0) / 1000
    let copies = 2 + Int((shape.warmupSeconds + shape.durationSeconds + 10) / max(lessonSeconds, 1))
    let load = BridgeLoad(loop: loop, shape: shape, workload: FanoutWorkload(lines: lines, copies: copies),
                          servers: daemons.map(\.udp), securities: daemons.map(\.security), seed: options.seed)
    var tap: BridgeTap?
    if options.tap, let proxy {
        let created = BridgeTap(rooms: shape.rooms, roomPrefix: "bridge-room-")
        created.handedAt = { [unowned load] room, roomSeq in load.handedAt(room: room, roomSeq: roomSeq) }
        created.inWindow = { [unowned load] time in load.inWindow(time) }
        created.attach(to: proxy)
        load.tap = created
        tap = created
    }
    let cpu0 = daemons.reduce(0) { $0 + $1.cpuSeconds }
    let wall0 = loop.now
    load.run(into: &result, progress: progress)
    let wall = Double(loop.now - wall0) / 1e6
    result.daemonCPUPercent = (daemons.reduce(0) { $0 + $1.cpuSeconds } - cpu0) / max(wall, 0.001) * 100
    result.bridgeMetrics = bridgeMetrics(of: daemons)
    if let tap {
        result.legs = [("home", BridgeLatency(tap.homeLeg)), ("broker", BridgeLatency(tap.brokerLeg)), ("follower", BridgeLatency(tap.followerLeg))]
    }
    if let proxy {
        result.proxyToBroker = proxy.counters(from: .client)
        result.proxyToDaemons = proxy.counters(from: .broker)
    }
    return result
}

/// The `bridge` metrics of every daemon: counters (`_total`) summed, other samples the largest.
func bridgeMetrics(of daemons: [FanoutDaemon]) -> [(String, Double)] {
    var merged: [String: Double] = [:]
    for daemon in daemons {
        guard let port = metricsPort(logPath: daemon.logPath) else { continue }
        for (name, value) in BridgeMetricsScrape.samples(port: port, filter: "bridge") {
            if name.hasSuffix("_total") { merged[name, default: 0] += value } else { merged[name] = max(merged[name] ?? value, value) }
        }
    }
    return merged.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
}

/// The metrics port from a daemon's `msg="ready" ... metrics=HOST:PORT` line.
func metricsPort(logPath: String) -> UInt16? {
    guard let text = FanoutDaemon.read(logPath) else { return nil }
    for line in text.split(separator: "\n") where line.contains("msg=\"ready\"") {
        guard let range = line.range(of: " metrics=") else { continue }
        let value = line[range.upperBound...].prefix { $0 != " " }.filter { $0 != "\"" }
        return value.split(separator: ":").last.flatMap { UInt16($0) }
    }
    return nil
}
