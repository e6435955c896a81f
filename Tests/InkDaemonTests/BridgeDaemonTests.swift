import Glibc
import InkBenchSupport
import InkCodec
import LegacyAppModel
import Testing

/// Real `inkwired` daemons bridged through a real `mosquitto` on loopback (issue 8). Skipped
/// when mosquitto is not installed.
@Suite(.serialized) struct BridgeDaemonTests {
    struct Bridged {
        let process: DaemonProcess
        let tcp: String
        let udp: String
        let legacyPort: UInt16
        let metricsPort: UInt16
        var directory: String { process.dataDir }
    }

    static func start(_ id: String?, broker: MQTTBroker, dataDir: String? = nil, tag: String, brokerPort: UInt16? = nil,
                      user: String? = nil, scheme: String = "mqtt", extra: [String] = []) throws -> Bridged {
        var arguments = ["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson", "--metrics", "127.0.0.1:0",
                         "--bridge", "\(scheme)://\(user.map { $0 + "@" } ?? "")127.0.0.1:\(brokerPort ?? broker.port)"] + extra
        if let id { arguments += ["--bridge-daemon-id", id] }
        let process = try DaemonProcess(arguments, dataDir: dataDir, tag: tag)
        let fields = try process.ready()
        return Bridged(process: process, tcp: "tcp://" + fields["tcp"]!, udp: "udp://" + fields["udp"]!,
                       legacyPort: process.legacyPort(fields), metricsPort: DaemonProcess.port(fields["metrics"])!)
    }

    /// A synthetic lesson for the native sender: `strokes` strokes of 5 points, 16 ms apart,
    /// coordinates unique to `tag` (so each sender's lines can be picked out of a watcher's).
    static func trace(strokes: Int, tag: Int, in directory: String) -> (path: String, lines: [String]) {
        var lines: [String] = []
        var messages: [String] = []
        for s in 0..<strokes {
            for p in 0..<5 {
                let phase = p == 0 ? 1 : (p == 4 ? 3 : 2)
                let text = "1,0.\(tag)\(String(format3(s)))\(p)0,0.5\(String(format3(s)))00,\(phase)"
                lines.append("\((s * 5 + p) * 16),\(text)")
                messages.append(text)
            }
        }
        let path = directory + "/lesson-\(tag).csv"
        writeFile(path, Array(lines.map { $0 + "\n" }.joined().utf8))
        return (path, messages)
    }

    private static func format3(_ n: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, 3 - s.count)) + s
    }

    static func homeDecided(_ d: Bridged, selfHome: Bool) -> Bool {
        ClientEndToEndTests.waitUntil {
            d.process.log.split(separator: "\n").contains { $0.contains("bridge home decided") && $0.contains("room=lesson") && $0.contains("self=\(selfHome)") }
        }
    }

    static func watch(_ d: Bridged, user: String, count: Int? = nil, idle: String = "10") throws -> ClientProcess {
        var arguments = ["watch", "--server", d.tcp, "--room", "lesson", "--user", user, "--idle-exit", idle]
        if let count { arguments += ["--count", String(count)] }
        return try ClientProcess(arguments, directory: d.directory)
    }

    static func send(_ d: Bridged, user: String, trace: String, speed: String) throws -> ClientProcess {
        try ClientProcess(["send", "--server", d.udp, "--room", "lesson", "--user", user, "--role", "presenter", "--trace", trace, "--speed", speed],
                          directory: d.directory)
    }

    /// `lines` restricted to those in `subset`, in order.
    static func only(_ lines: [String], _ subset: [String]) -> [String] {
        let set = Set(subset)
        return lines.filter { set.contains($0) }
    }

    @Test func legacyAndNativeSendersOnOneDaemonReachWatchersOnAnotherExactlyInRoomOrder() throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        // B holds the room first (its watchers joined), so it is the home: A forwards.
        let b = try Self.start("b", broker: broker, tag: "bridge-b")
        let legacyStrokes = 3
        // Drawn with the initial pen, as the native sender's: the legacy view adds no pen lines.
        let legacyStroke = ["1,0.100000,0.200000,1", "1,0.110000,-0.013333,2", "1,1.020000,0.220000,3"]
        let legacyTexts = (0..<legacyStrokes).flatMap { _ in legacyStroke }
        let native = Self.trace(strokes: 20, tag: 7, in: b.directory)
        let total = legacyTexts.count + native.lines.count
        let watcherB = try Self.watch(b, user: "wb", count: total, idle: "20")
        let runner = LegacyAppRunner(seed: 61)
        let legacyWatcherB = try runner.connect("wb-app", port: b.legacyPort)
        #expect(Self.homeDecided(b, selfHome: true), "\(b.process.log)")

        let a = try Self.start("a", broker: broker, tag: "bridge-a")
        let watcherA = try Self.watch(a, user: "wa", count: total, idle: "20")
        let legacyWatcherA = try runner.connect("wa-app", port: a.legacyPort)
        #expect(Self.homeDecided(a, selfHome: false), "\(a.process.log)")
        #expect(ClientEndToEndTests.waitJoined(ClientEndToEndTests.Daemon(process: a.process, udp: a.udp, tcp: a.tcp, legacyPort: a.legacyPort),
                                               room: "lesson", user: "wa"))
        let legacySender = try runner.connect("sender-app", port: a.legacyPort)
        #expect(LegacyApps.waitUp(runner, [legacySender]))
        let sender = try Self.send(a, user: "teacher", trace: native.path, speed: "4")
        for _ in 0..<legacyStrokes { LegacyApps.draw(legacyStroke, on: legacySender, runner) }
        runner.run(limitMicroseconds: 30_000_000) { [sender, watcherB, watcherA].allSatisfy { $0.hasExited } }
        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(watcherB.wait() == 0, "\(watcherB.errors)")
        #expect(watcherA.wait() == 0, "\(watcherA.errors)")
        // One room order on both daemons; each sender's commands exactly, in its order.
        #expect(watcherB.outputLines.count == total)
        #expect(watcherB.outputLines == watcherA.outputLines)
        #expect(Self.only(watcherB.outputLines, native.lines) == native.lines)
        #expect(Self.only(watcherB.outputLines, legacyStroke) == legacyTexts)
        // The legacy watchers on both daemons show both senders' lines, each sender's in its order.
        let parts = [LegacyTraceScript.referenceScreen(try Trace.parse(readFile(native.path))), LegacyApps.screen(legacyTexts)]
        let apps = [legacyWatcherA, legacyWatcherB, legacySender]
        #expect(runner.run(limitMicroseconds: 10_000_000) { apps.allSatisfy { $0.model.screen.interleaves(parts) } },
                "\(apps.map { "\($0): \($0.model.screen.explain(parts))" })")

        let metrics = try fetchMetrics(port: a.metricsPort)
        #expect(metricValue(metrics, "inkwire_bridge_connected") == 1)
        #expect((metricValue(metrics, "inkwire_bridge_published_total") ?? 0) >= Double(legacyStrokes))
        #expect((metricValue(metrics, "inkwire_bridge_received_total") ?? 0) >= 1)
        #expect(metricValue(try fetchMetrics(port: b.metricsPort), "inkwire_bridge_rooms_led") == 1)
    }

    @Test func aBrokerRestartMidLessonLosesNothing() throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        let a = try Self.start("a", broker: broker, tag: "bridge-ra")
        let nativeA = Self.trace(strokes: 30, tag: 3, in: a.directory)
        let nativeB = Self.trace(strokes: 30, tag: 4, in: a.directory)
        let total = nativeA.lines.count + nativeB.lines.count
        let watcherA = try Self.watch(a, user: "wa", count: total, idle: "15")
        #expect(Self.homeDecided(a, selfHome: true))
        let b = try Self.start("b", broker: broker, tag: "bridge-rb")
        let watcherB = try Self.watch(b, user: "wb", count: total, idle: "15")
        #expect(Self.homeDecided(b, selfHome: false))
        // About 2.4 s of drawing on each daemon; the broker is down for 0.5 s in the middle.
        let senderA = try Self.send(a, user: "ada", trace: nativeA.path, speed: "1")
        let senderB = try Self.send(b, user: "bob", trace: nativeB.path, speed: "1")
        usleep(700_000)
        broker.stop()
        usleep(500_000)
        try broker.start()
        #expect(senderA.wait() == 0, "\(senderA.errors)")
        #expect(senderB.wait() == 0, "\(senderB.errors)")
        #expect(watcherA.wait() == 0, "\(watcherA.errors)")
        #expect(watcherB.wait() == 0, "\(watcherB.errors)")
        #expect(watcherB.outputLines == watcherA.outputLines)
        #expect(Self.only(watcherB.outputLines, nativeA.lines) == nativeA.lines)
        #expect(Self.only(watcherB.outputLines, nativeB.lines) == nativeB.lines)
        #expect(b.process.log.contains("bridge disconnected"))
    }

    @Test func aRestartedDaemonAndALateThirdDaemonGetTheWholeBoard() throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        let a = try Self.start("a", broker: broker, tag: "bridge-da")
        let native = Self.trace(strokes: 30, tag: 5, in: a.directory)
        let watcherA = try Self.watch(a, user: "wa", count: native.lines.count)
        #expect(Self.homeDecided(a, selfHome: true))
        // B keeps the id it generated in its data dir across the restart.
        let directoryB = DaemonProcess.scratchDirectory("bridge-db")
        defer { _ = system("rm -rf '\(directoryB)'") }
        var b: Bridged? = try Self.start(nil, broker: broker, dataDir: directoryB, tag: "bridge-db")
        // A daemon bridges the rooms it holds: this watcher opens the room on B.
        let opener = try Self.watch(b!, user: "wb", idle: "30")
        defer { withExtendedLifetime(opener) {} }
        #expect(Self.homeDecided(b!, selfHome: false))
        let sender = try Self.send(a, user: "ada", trace: native.path, speed: "1")
        // B goes down mid-lesson, once it has replicated part of it.
        let port = b!.metricsPort
        #expect(ClientEndToEndTests.waitUntil { ((try? fetchMetrics(port: port)).flatMap { metricValue($0, "inkwire_bridge_received_total") } ?? 0) >= 10 })
        b!.process.signal(SIGTERM)
        #expect(b!.process.waitExit() == 0)
        let idBefore = readFile(directoryB + "/data/bridge-daemon-id")
        b = nil
        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(watcherA.wait() == 0)
        #expect(watcherA.outputLines == native.lines)

        // B restarts from its replica and catches up; C joins late with nothing.
        let b2 = try Self.start(nil, broker: broker, dataDir: directoryB, tag: "bridge-db")
        #expect(readFile(directoryB + "/data/bridge-daemon-id") == idBefore && !idBefore.isEmpty)
        let c = try Self.start("c", broker: broker, tag: "bridge-dc")
        let lateB = try Self.watch(b2, user: "late-b", count: native.lines.count)
        let lateC = try Self.watch(c, user: "late-c", count: native.lines.count)
        #expect(lateB.wait() == 0, "\(lateB.errors)")
        #expect(lateC.wait() == 0, "\(lateC.errors)")
        #expect(lateB.outputLines == native.lines)
        #expect(lateC.outputLines == native.lines)
        let metricsC = try fetchMetrics(port: c.metricsPort)
        #expect((metricValue(metricsC, "inkwire_bridge_gap_repairs_total") ?? 0) >= Double(native.lines.count / 5))
    }

    @Test func throughChaosProxiesEveryWatcherGetsExactlyTheSentCommandsInOneOrder() throws {
        guard MQTTBroker.isInstalled, MQTTChaosChild.isBuilt else { return }
        let broker = try MQTTBroker()
        let scratch = DaemonProcess.scratchDirectory("bridge-chaos")
        defer { _ = system("rm -rf '\(scratch)'") }
        // Each daemon reaches the broker through its own proxy: publishes delayed 5-45 ms
        // (so reordered), a fifth duplicated, some released in bursts.
        let chaos = ["--delay-ms", "5", "--jitter-ms", "40", "--duplicate-percent", "20", "--burst-percent", "10"]
        let proxyA = try MQTTChaosChild(brokerPort: broker.port, seed: 11, arguments: chaos, directory: scratch)
        let proxyB = try MQTTChaosChild(brokerPort: broker.port, seed: 12, arguments: chaos, directory: scratch)
        defer { withExtendedLifetime((proxyA, proxyB)) {} }
        let a = try Self.start("a", broker: broker, tag: "bridge-ca", brokerPort: proxyA.port)
        let nativeA = Self.trace(strokes: 30, tag: 1, in: a.directory)
        let nativeB = Self.trace(strokes: 30, tag: 2, in: a.directory)
        let total = nativeA.lines.count + nativeB.lines.count
        let watcherA = try Self.watch(a, user: "wa", count: total, idle: "20")
        #expect(Self.homeDecided(a, selfHome: true), "\(a.process.log)")
        let b = try Self.start("b", broker: broker, tag: "bridge-cb", brokerPort: proxyB.port)
        let watcherB = try Self.watch(b, user: "wb", count: total, idle: "20")
        #expect(Self.homeDecided(b, selfHome: false), "\(b.process.log)")
        let senderA = try Self.send(a, user: "ada", trace: nativeA.path, speed: "2")
        let senderB = try Self.send(b, user: "bob", trace: nativeB.path, speed: "2")
        #expect(senderA.wait() == 0, "\(senderA.errors)")
        #expect(senderB.wait() == 0, "\(senderB.errors)")
        #expect(watcherA.wait() == 0, "\(watcherA.errors)")
        #expect(watcherB.wait() == 0, "\(watcherB.errors)")
        #expect(watcherA.outputLines.count == total)
        #expect(watcherB.outputLines == watcherA.outputLines)
        #expect(Self.only(watcherB.outputLines, nativeA.lines) == nativeA.lines)
        #expect(Self.only(watcherB.outputLines, nativeB.lines) == nativeB.lines)
        // The chaos reached the bridge: copies were dropped.
        let scrapes = try [a, b].map { try fetchMetrics(port: $0.metricsPort) }
        let duplicates = scrapes.map { metricValue($0, "inkwire_bridge_duplicates_dropped_total") ?? 0 }
        let depth = scrapes.map { metricValue($0, "inkwire_bridge_reorder_depth_max") ?? 0 }
        print("bridge chaos: \(total) commands, duplicates dropped a/b \(duplicates), reorder depth max a/b \(depth)")
        #expect(duplicates.reduce(0, +) > 0)
    }

    @Test func theHomeRestartsMidLessonAndForwardedBatchesAllLand() throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        let directoryA = DaemonProcess.scratchDirectory("bridge-ha")
        defer { _ = system("rm -rf '\(directoryA)'") }
        var a: Bridged? = try Self.start("a", broker: broker, dataDir: directoryA, tag: "bridge-ha")
        let opener = try Self.watch(a!, user: "wa", idle: "30")
        #expect(Self.homeDecided(a!, selfHome: true))
        let b = try Self.start("b", broker: broker, tag: "bridge-hb")
        let native = Self.trace(strokes: 30, tag: 6, in: b.directory)
        let watcherB = try Self.watch(b, user: "wb", count: native.lines.count, idle: "20")
        #expect(Self.homeDecided(b, selfHome: false))
        // B's member draws; its batches go to the home A, which stops and comes back meanwhile.
        let sender = try Self.send(b, user: "bob", trace: native.path, speed: "1")
        let port = b.metricsPort
        #expect(ClientEndToEndTests.waitUntil { ((try? fetchMetrics(port: port)).flatMap { metricValue($0, "inkwire_bridge_received_total") } ?? 0) >= 10 })
        a!.process.signal(SIGTERM)
        #expect(a!.process.waitExit() == 0)
        withExtendedLifetime(opener) {}
        a = nil
        usleep(300_000)
        let a2 = try Self.start("a", broker: broker, dataDir: directoryA, tag: "bridge-ha")
        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(watcherB.wait() == 0, "\(watcherB.errors)")
        #expect(watcherB.outputLines == native.lines)
        let late = try Self.watch(a2, user: "late-a", count: native.lines.count)
        #expect(late.wait() == 0, "\(late.errors)")
        #expect(late.outputLines == native.lines)
        #expect(a2.process.log.contains("self=true"))
    }
}
