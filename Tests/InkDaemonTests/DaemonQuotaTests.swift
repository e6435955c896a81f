import Glibc
import InkBenchSupport
import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

/// Issue 18's attacks on the real daemon, each from its own loopback address (127.0.0.2, .3...:
/// other devices, as the per-address quotas see them): one student's sessions, connections,
/// rooms and idle sockets take their quota and no more; the teacher still joins and draws,
/// apps still join, another host still creates a room, and the metrics scrape answers.
@Suite(.serialized) struct DaemonQuotaTests {
    static func isJoinAnswer(_ m: ServerMessage) -> Bool {
        if case .joinAccepted = m { return true }
        if case .joinRefused = m { return true }
        return false
    }

    static func accepted(_ m: ServerMessage?) -> Bool {
        if case .joinAccepted = m { return true }
        return false
    }

    static func lines(_ daemon: DaemonProcess, _ text: String) -> [[String: String]] {
        daemon.log.split(separator: "\n").filter { $0.contains(text) }.map { parseLogfmt(String($0)) }
    }

    /// One viewer token opens 256 TCP sessions as the same user (which needed no traffic to
    /// stay open, and filled the room): four get in. The teacher's token joins and draws, and a
    /// watcher gets exactly the teacher's stroke.
    @Test func oneViewerTokenWith256SessionsCannotKeepTheTeacherOut() throws {
        let s = try DaemonSecurityTests.start("quota-user", extra: ["--max-handshakes-per-second", "100000"])
        defer { withExtendedLifetime(s.daemon) {} }
        let bo = DaemonSecurityTests.token("bo", .viewer)
        var attackers: [NativeTestClient] = []
        var answers: [ServerMessage?] = []
        for _ in 0..<256 {
            let c = try NativeTestClient(.tcp, port: s.tcp, serverKey: s.key, from: "127.0.0.2")
            c.join(room: "lesson", user: "bo", role: .viewer, token: bo)
            answers.append(c.next(where: Self.isJoinAnswer))
            attackers.append(c)
        }
        // Four get in; the rest are refused (a session whose confirmation the daemon had not seen
        // yet may have made way for the next, so count what stays).
        let refusal = ServerMessage.joinRefused(.quotaExceeded, text: "user bo has 4 sessions in this room, the most one user may (none idle)")
        let refused = answers.filter { $0 == refusal }.count
        #expect(refused >= 248 && refused + answers.filter(Self.accepted).count == 256)

        let watcher = try NativeTestClient(.udp, port: s.udp, serverKey: s.key, from: "127.0.0.3")
        #expect(DaemonSecurityTests.joined(watcher, "cy", .viewer, token: DaemonSecurityTests.token("cy", .viewer)) != nil)
        let teacher = try NativeTestClient(.udp, port: s.udp, serverKey: s.key, from: "127.0.0.4")
        let author = try #require(DaemonSecurityTests.joined(teacher, "ana", .teacher, token: DaemonSecurityTests.token("ana", .teacher)))
        let stroke = DaemonSecurityTests.stroke(0)
        teacher.sendBatch(stroke, originSeq: 1, author: author)
        #expect(teacher.next(where: { if case .batchAck(1, _) = $0 { true } else { false } }) != nil)
        let delivered = try #require(watcher.nextRoomBatch())
        #expect(delivered.1 == stroke && delivered.0.author == author && delivered.0.roomSeq == 1)

        let metrics = try fetchMetrics(port: s.metrics)
        #expect(metricValue(metrics, "inkwire_quota_refusals_total{quota=\"sessions_per_user\"}") == Double(refused))
        #expect(metricValue(metrics, "inkwire_refused_joins_total{reason=\"quotaExceeded\"}") == Double(refused))
        #expect(metricValue(metrics, "inkwire_limit_sessions_per_user") == 4)
        #expect(metricValue(metrics, "inkwire_members") == 6)
        // One line for the offender this minute, however often it tried.
        let logged = Self.lines(s.daemon, "join refused: quota reached")
        #expect(logged.count == 1 && logged.first?["offender"] == "user bo" && logged.first?["quota"] == "sessions_per_user", "\(logged)")
    }

    /// 256 token-less legacy connections from one address that only send heartbeats: three
    /// stay (an iPad and its reconnects), the rest are closed; two real apps (the app model)
    /// from other addresses join and see each other's strokes.
    @Test func heartbeatOnlyLegacyConnectionsCannotFillTheLegacyRoom() throws {
        let (daemon, port, _) = try LegacyApps.daemon("quota-legacy", extra: ["--metrics", "127.0.0.1:0"])
        defer { withExtendedLifetime(daemon) {} }
        let metricsPort = try #require(DaemonProcess.port(try daemon.ready()["metrics"]))
        var flood: [RawLegacySocket] = []
        for _ in 0..<256 {
            let socket = try RawLegacySocket(port: port, from: "127.0.0.2")
            socket.sendHeartbeat()
            flood.append(socket)
        }
        let refusedSeries = "inkwire_quota_refusals_total{quota=\"legacy_per_address\"}"
        #expect(ClientEndToEndTests.waitUntil { (try? fetchMetrics(port: metricsPort)).flatMap { metricValue($0, refusedSeries) } == 253 })
        let survivors = flood.filter { !$0.waitClosed(limitMicroseconds: 20_000) }
        #expect(survivors.count == 3)

        let runner = LegacyAppRunner(seed: 18)
        let a = try runner.connect("a", port: port, from: "127.0.0.3", configuration: LegacyApps.configuration(1))
        let b = try runner.connect("b", port: port, from: "127.0.0.4", configuration: LegacyApps.configuration(2))
        #expect(LegacyApps.waitUp(runner, [a, b]))
        for socket in survivors { socket.sendHeartbeat() }
        runner.run(limitMicroseconds: 1_000_000)  // the daemon writes nothing for 1 s
        LegacyApps.draw(DaemonLegacyTests.stroke, on: a, runner)
        #expect(LegacyApps.waitScreens(runner, [a, b], equal: LegacyApps.screen(DaemonLegacyTests.stroke)))
        for app in [a, b] { #expect(app.isConnected && app.model.desync == nil, "\(app)") }
        let logged = Self.lines(daemon, "join refused: quota reached")
        #expect(logged.count == 1 && logged.first?["offender"] == "address 127.0.0.2", "\(logged)")
        let closed = Self.lines(daemon, "msg=\"legacy device refused\"")
        #expect(closed.count == 1 && closed.first?["refused_unlogged"] == "0", "\(closed)")
    }

    /// On an open daemon one host creates rooms as fast as it can: ten a minute get made, then
    /// it is refused; another host still creates its rooms. Once the spammer's members leave,
    /// its empty rooms are released and their places come back.
    @Test func oneHostCannotTakeEveryRoomOnAnOpenDaemon() throws {
        let daemon = try DaemonProcess(["--udp", "off", "--tcp", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--max-rooms", "16",
                                        "--empty-room-expiry", "2s", "--max-handshakes-per-second", "100000"], tag: "quota-rooms")
        defer { withExtendedLifetime(daemon) {} }
        let fields = try daemon.ready()
        let tcp = try #require(DaemonProcess.port(fields["tcp"])), metricsPort = try #require(DaemonProcess.port(fields["metrics"]))
        let key = try #require(PublicKeyText.decode(fields["public_key"] ?? ""))
        func join(_ room: String, from source: String) throws -> (NativeTestClient, ServerMessage?) {
            let c = try NativeTestClient(.tcp, port: tcp, serverKey: key, from: source)
            c.join(room: room, user: "u", role: .teacher)
            return (c, c.next(where: Self.isJoinAnswer))
        }
        var spam: [NativeTestClient] = []
        var answers: [ServerMessage?] = []
        for i in 0..<40 {
            let (c, answer) = try join("spam-\(i)", from: "127.0.0.2")
            spam.append(c)
            answers.append(answer)
        }
        #expect(answers.prefix(10).allSatisfy(Self.accepted))
        let refusal = ServerMessage.joinRefused(.quotaExceeded, text: "address 127.0.0.2 created 10 rooms in the last minute; try again in a minute")
        #expect(answers.dropFirst(10).allSatisfy { $0 == refusal })
        var others: [NativeTestClient] = []
        for i in 0..<6 {
            let (c, answer) = try join("maths-\(i)", from: "127.0.0.3")
            #expect(Self.accepted(answer))
            others.append(c)
        }
        let (_, full) = try join("art", from: "127.0.0.4")
        #expect(full == .joinRefused(.tooManyRooms, text: "the daemon holds 16 rooms"))
        // The spammer's sessions end: its rooms are empty and never had a batch.
        spam.removeAll()
        #expect(ClientEndToEndTests.waitUntil { (try? fetchMetrics(port: metricsPort)).flatMap { metricValue($0, "inkwire_rooms") } == 6 })
        let (art, again) = try join("art", from: "127.0.0.4")
        #expect(Self.accepted(again))
        let metrics = try fetchMetrics(port: metricsPort)
        #expect(metricValue(metrics, "inkwire_rooms_released_total") == 10)
        #expect(metricValue(metrics, "inkwire_quota_refusals_total{quota=\"rooms_per_address\"}") == 30)
        #expect(metricValue(metrics, "inkwire_limit_rooms_per_address_per_minute") == 10)
        #expect(metricValue(metrics, "inkwire_limit_empty_room_expiry_seconds") == 2)
        let logged = Self.lines(daemon, "join refused: quota reached")
        #expect(logged.count == 1 && logged.first?["offender"] == "address 127.0.0.2" && logged.first?["quota"] == "rooms_per_address", "\(logged)")
        withExtendedLifetime((others, art)) {}
    }

    /// 32 idle connections to the metrics port, and about three new ones a second, from another
    /// host and then from the scraper's own address: every scrape still answers, well within
    /// the second.
    @Test func idleConnectionsCannotBlindMonitoring() throws {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off", "--metrics", "127.0.0.1:0"], tag: "quota-metrics")
        defer { withExtendedLifetime(daemon) {} }
        let port = try #require(DaemonProcess.port(try daemon.ready()["metrics"]))
        var latencies: [UInt64] = []
        var failed = 0
        for flooder in ["127.0.0.2", "127.0.0.1"] {
            var idle: [Int32] = []
            for _ in 0..<32 { idle.append(try connectLoopback(port: port, type: SOCK_STREAM, from: flooder)) }
            let start = monotonicMicroseconds()
            var nextIdle = start, nextScrape = start
            while monotonicMicroseconds() < start + 4_000_000 {
                let now = monotonicMicroseconds()
                if now >= nextIdle {
                    idle.append(try connectLoopback(port: port, type: SOCK_STREAM, from: flooder))
                    nextIdle += 333_000
                }
                if now >= nextScrape {
                    let reply = try httpGet(port: port, path: "/metrics", limitMicroseconds: 5_000_000)
                    latencies.append(monotonicMicroseconds() - now)
                    if reply.status != 200 || !reply.body.contains("inkwire_build_info") { failed += 1 }
                    nextScrape = monotonicMicroseconds() + 250_000
                }
                usleep(5_000)
            }
            for fd in idle { close(fd) }
        }
        let sorted = latencies.sorted()
        let median = sorted[sorted.count / 2], worst = sorted.last ?? 0
        print("{\"test\":\"metrics-flood\",\"scrapes\":\(sorted.count),\"failed\":\(failed),\"p50_ms\":\(Double(median) / 1000),\"max_ms\":\(Double(worst) / 1000)}")
        #expect(failed == 0 && sorted.count >= 20)
        #expect(median < 1_000_000)
        #expect(worst < 3_000_000, "the issue's 1 s, with slack for a loaded test host")
        let metrics = try fetchMetrics(port: port)
        #expect((metricValue(metrics, "inkwire_metrics_connections_dropped_total{reason=\"evicted\"}") ?? 0) > 0)
        #expect((metricValue(metrics, "inkwire_metrics_connections_dropped_total{reason=\"timeout\"}") ?? 0) > 0)
    }

    /// The quotas are settings: shown in /metrics and applied again from the file on SIGHUP.
    @Test func quotasReloadOnSIGHUPAndShowInMetrics() throws {
        let scratch = DaemonProcess.scratchDirectory("quota-reload-config")
        defer { _ = system("rm -rf '\(scratch)'") }
        let file = scratch + "/inkwired.env"
        writeFile(file, Array("INKWIRE_MAX_SESSIONS_PER_USER=1\nINKWIRE_MEMBER_TIMEOUT=5m\n".utf8))
        let daemon = try DaemonProcess(["--udp", "off", "--tcp", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--config", file], tag: "quota-reload")
        defer { withExtendedLifetime(daemon) {} }
        let fields = try daemon.ready()
        let tcp = try #require(DaemonProcess.port(fields["tcp"])), metricsPort = try #require(DaemonProcess.port(fields["metrics"]))
        let key = try #require(PublicKeyText.decode(fields["public_key"] ?? ""))
        var clients: [NativeTestClient] = []
        func join() throws -> ServerMessage? {
            let c = try NativeTestClient(.tcp, port: tcp, serverKey: key, from: "127.0.0.2")
            clients.append(c)
            c.join(room: "r", user: "bo", role: .viewer)
            return c.next(where: Self.isJoinAnswer)
        }
        #expect(Self.accepted(try join()))
        #expect(try join() == .joinRefused(.quotaExceeded, text: "user bo has 1 sessions in this room, the most one user may (none idle)"))
        var metrics = try fetchMetrics(port: metricsPort)
        #expect(metricValue(metrics, "inkwire_limit_sessions_per_user") == 1)
        #expect(metricValue(metrics, "inkwire_limit_member_timeout_seconds") == 300)
        writeFile(file, Array("INKWIRE_MAX_SESSIONS_PER_USER=2\n".utf8))
        daemon.signal(SIGHUP)
        let reloaded = daemon.waitForLine(containing: "msg=\"reloaded\"")
        #expect(reloaded?.contains("max_sessions_per_user=2") == true, "\(reloaded ?? daemon.log)")
        #expect(Self.accepted(try join()))
        metrics = try fetchMetrics(port: metricsPort)
        #expect(metricValue(metrics, "inkwire_limit_sessions_per_user") == 2)
        // The line removed from the file goes back to its default.
        #expect(metricValue(metrics, "inkwire_limit_member_timeout_seconds") == 120)
    }
}
