import Glibc
import InkBenchSupport
import LegacyAppModel
import InkCodec
import InkProtocol
import InkVersion
import Testing
@testable import InkDaemon

/// The real daemon: configuration errors, systemd notifications, signals, abuse.
@Suite struct DaemonLifecycleTests {
    /// Runs `inkwired arguments` to completion; its exit code, stdout and stderr.
    static func runToExit(_ arguments: [String], environment: [String: String] = [:]) throws -> (Int32?, String, String) {
        let daemon = try DaemonProcess(arguments, environment: environment, tag: "exit")
        let code = daemon.waitExit()
        return (code, daemon.standardOutput, daemon.log)
    }

    @Test func checkConfigAcceptsAGoodConfiguration() throws {
        let (code, out, _) = try Self.runToExit(["--check-config", "--udp", "127.0.0.1:0", "--legacy", "[::1]:0=room one"])
        #expect(code == 0)
        #expect(out.contains("configuration ok"))
        #expect(out.contains("legacy [::1]:0=room one"))
    }

    @Test(arguments: [
        (["--udp", "1.2.3:4"], "--udp: invalid address '1.2.3:4'"),
        (["--frobnicate"], "unknown option --frobnicate"),
        (["--durability", "sometimes"], "--durability 'sometimes': expected always, batch or off"),
        (["--legacy", "127.0.0.1:0"], "--legacy '127.0.0.1:0': expected HOST:PORT=ROOM"),
        (["--max-members", "0"], "--max-members '0': expected a whole number from 1 to 65536"),
        (["--token-secret-file", "/nonexistent/secret"], "--token-secret-file /nonexistent/secret: cannot read the file"),
        (["--log-level"], "--log-level needs a value LEVEL"),
    ])
    func checkConfigRefusesWithAClearMessage(arguments: [String], message: String) throws {
        let (code, _, err) = try Self.runToExit(["--check-config"] + arguments)
        #expect(code == DaemonMain.configErrorExitCode)
        #expect(err.contains(message), "stderr: \(err)")
    }

    @Test func environmentIsReadAndFlagsWin() throws {
        let (code, out, _) = try Self.runToExit(["--check-config", "--tcp", "127.0.0.1:0"],
                                                environment: ["INKWIRE_TCP": "nonsense", "INKWIRE_UDP": "127.0.0.1:9,[::1]:9"])
        #expect(code == 0)
        #expect(out.contains("udp 127.0.0.1:9,[::1]:9, tcp 127.0.0.1:0"))
        let (bad, _, err) = try Self.runToExit(["--check-config"], environment: ["INKWIRE_DURABILITY": "maybe"])
        #expect(bad == DaemonMain.configErrorExitCode)
        #expect(err.contains("--durability 'maybe'"))
    }

    @Test func helpListsEveryFlagAndVersionPrints() throws {
        for spelling in ["--help", "-h"] {
            let (code, out, _) = try Self.runToExit([spelling])
            #expect(code == 0)
            for flag in ConfigFlag.all where !flag.hidden {
                #expect(out.contains("--\(flag.name)"), "\(spelling) misses --\(flag.name)")
            }
        }
        let (versionCode, version, _) = try Self.runToExit(["--version"])
        #expect(versionCode == 0)
        #expect(version == "inkwired \(InkwireVersion.string) (commit \(InkwireVersion.commit))\n")
        // The VERSION file is the one source of the version.
        let file = String(decoding: readFile(DeployTests.packageRoot + "/VERSION"), as: UTF8.self)
        #expect(file == InkwireVersion.string + "\n")
    }

    @Test func aFailedStartIsNotABadConfiguration() throws {
        // The address is taken: the configuration is fine, a later restart may work (exit 1).
        let (fd, port) = try DaemonActivationTests.boundSocket(SOCK_DGRAM)
        defer { close(fd) }
        let (code, _, err) = try Self.runToExit(["--udp", "127.0.0.1:\(port)", "--tcp", "off"])
        #expect(code == DaemonExit.startFailed, "\(err)")
        #expect(err.contains("cannot listen"), "\(err)")
        // A bad setting in the file is a bad configuration (exit 2), which the unit never restarts.
        let directory = DaemonProcess.scratchDirectory("badfile")
        defer { _ = system("rm -rf '\(directory)'") }
        writeFile(directory + "/inkwired.env", Array("INKWIRE_MAX_SESIONS=9\n".utf8))
        let (bad, _, badErr) = try Self.runToExit(["--config", directory + "/inkwired.env", "--udp", "127.0.0.1:0"])
        #expect(bad == DaemonExit.badConfiguration)
        #expect(badErr.contains("inkwired.env:1: unknown setting INKWIRE_MAX_SESIONS"), "\(badErr)")
        let unit = String(decoding: readFile(DeployTests.deploy + "/inkwired.service"), as: UTF8.self)
        #expect(unit.contains("\nRestartPreventExitStatus=\(DaemonExit.badConfiguration) \(DaemonExit.dataRefused)\n"))
    }

    @Test func shortTokenSecretIsRefused() throws {
        let directory = DaemonProcess.scratchDirectory("secret")
        writeFile(directory + "/secret", Array("short\n".utf8))
        let (code, _, err) = try Self.runToExit(["--check-config", "--token-secret-file", directory + "/secret"])
        #expect(code == DaemonMain.configErrorExitCode)
        #expect(err.contains("the secret must be 16 to 4096 bytes, found 5"))
    }

    @Test func systemdSeesReadyWatchdogReloadAndStopping() throws {
        let manager = FakeNotifySocket(abstract: true, tag: "daemon-\(UInt32.random(in: 0...UInt32.max))")
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0"],
                                       environment: ["NOTIFY_SOCKET": manager.address, "WATCHDOG_USEC": "200000"], tag: "notify")
        _ = try daemon.ready()
        var messages: [String] = []
        func collect(until predicate: () -> Bool) {
            let deadline = monotonicMicroseconds() + 5_000_000
            while !predicate() && monotonicMicroseconds() < deadline {
                if let message = manager.receive() { messages.append(message) } else { usleep(5_000) }
            }
        }
        collect { messages.contains { $0.hasPrefix("READY=1") } }
        #expect(messages.first?.hasPrefix("READY=1\nSTATUS=0 rooms, 0 members") == true)
        // Pings at half WATCHDOG_USEC: about 5 in 0.5 s.
        let started = monotonicMicroseconds()
        collect { monotonicMicroseconds() - started >= 500_000 }
        let pings = messages.filter { $0 == "WATCHDOG=1" }.count
        #expect(pings >= 3 && pings <= 7, "\(pings) watchdog pings in 0.5 s")
        messages = []
        daemon.signal(SIGHUP)
        collect { messages.contains { $0.hasPrefix("READY=1") } }
        let reload = messages.filter { $0 != "WATCHDOG=1" }
        #expect(reload.count == 2)
        #expect(reload.first?.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") == true)
        #expect(reload.last?.hasPrefix("READY=1") == true)
        messages = []
        daemon.signal(SIGTERM)
        collect { messages.contains("STOPPING=1") }
        #expect(messages.contains("STOPPING=1"))
        #expect(daemon.waitExit() == 0)
        #expect(daemon.log.contains("msg=\"room log flushed\""))
    }

    @Test func sigintStopsCleanlyToo() throws {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off"], tag: "sigint")
        _ = try daemon.ready()
        daemon.signal(SIGINT)
        #expect(daemon.waitExit() == 0)
        #expect(daemon.log.contains("msg=\"stopping\" signal=SIGINT"))
    }

    @Test func reloadAppliesTheConfigFileAndKeepsDevices() throws {
        let directory = DaemonProcess.scratchDirectory("reload")
        let configPath = directory + "/inkwired.env"
        writeFile(configPath, Array("# test\nINKWIRE_LOG_LEVEL=info\n".utf8))
        let daemon = try DaemonProcess(["--udp", "off", "--tcp", "off", "--legacy", "127.0.0.1:0=lesson", "--config", configPath],
                                       environment: ["INKWIRE_MAX_SESSIONS": "11"], dataDir: directory, tag: "reload")
        let port = daemon.legacyPort(try daemon.ready())
        let runner = LegacyAppRunner(seed: 31)
        let a = try runner.connect("a", port: port)
        let b = try runner.connect("b", port: port)
        #expect(daemon.waitForLine(containing: "author=2") != nil)
        #expect(LegacyApps.waitUp(runner, [a, b]))
        writeFile(configPath, Array(("INKWIRE_LOG_LEVEL=debug\nINKWIRE_MAX_SESSIONS=7\nINKWIRE_DURABILITY=always\n"
                                     + "INKWIRE_MAX_ROOM_HISTORY_BYTES=4096\nINKWIRE_ROOM_IDLE_EXPIRY=12h\nINKWIRE_NEW_SESSIONS_PER_SECOND=3\n").utf8))
        daemon.signal(SIGHUP)
        let reloaded = daemon.waitForLine(containing: "msg=\"reloaded\"")
        #expect(reloaded?.contains("log_level=debug") == true)
        #expect(reloaded?.contains("max_sessions=11") == true, "the environment wins over the file: \(reloaded ?? "")")
        #expect(reloaded?.contains("max_room_history_bytes=4096") == true)
        #expect(reloaded?.contains("room_idle_expiry_ms=43200000") == true)
        #expect(reloaded?.contains("new_sessions_per_second=3") == true)
        #expect(daemon.log.contains("msg=\"reload ignores settings that need a restart\" settings=durability"))
        // The devices stayed connected and keep drawing.
        let line = ["1,0.100000,0.100000,1", "1,0.200000,0.100000,3"]
        LegacyApps.draw(line, on: a, runner)
        #expect(LegacyApps.waitScreens(runner, [a, b], equal: LegacyApps.screen(line)), "\(b)")
        // Lines removed from the file go back to their defaults at the next reload.
        writeFile(configPath, Array("INKWIRE_MAX_ROOM_HISTORY_BYTES=8192\n".utf8))
        daemon.signal(SIGHUP)
        let again = daemon.waitForLine(containing: "max_room_history_bytes=8192")
        #expect(again?.contains("log_level=info") == true, "\(again ?? "")")
        #expect(again?.contains("room_idle_expiry_ms=2592000000") == true, "\(again ?? "")")
        #expect(again?.contains("new_sessions_per_second=20") == true, "\(again ?? "")")
        // A broken file is refused and the running configuration kept.
        writeFile(configPath, Array("INKWIRE_LOG_LEVEL=loud\n".utf8))
        daemon.signal(SIGHUP)
        #expect(daemon.waitForLine(containing: "msg=\"reload failed; keeping the running configuration\"") != nil)
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)
    }

    @Test func garbageFromOthersNeverDisturbsARoom() throws {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson",
                                        "--metrics", "127.0.0.1:0"], tag: "garbage")
        let fields = try daemon.ready()
        let legacy = daemon.legacyPort(fields)
        let runner = LegacyAppRunner(seed: 32)
        let a = try runner.connect("a", port: legacy)
        let b = try runner.connect("b", port: legacy)
        #expect(daemon.waitForLine(containing: "author=2") != nil)
        #expect(LegacyApps.waitUp(runner, [a, b]))
        var drawn: [String] = []
        var head: UInt64 = 0
        let pen = try NativeTestClient(.udp, port: DaemonProcess.port(fields["udp"])!)
        let penAuthor = try #require(DaemonNativeTests.joined(pen, user: "pen", role: .presenter))
        let watcher = try NativeTestClient(.tcp, port: DaemonProcess.port(fields["tcp"])!)
        #expect(DaemonNativeTests.joined(watcher, user: "watcher", role: .viewer) != nil)
        let udp = try connectLoopback(port: DaemonProcess.port(fields["udp"])!, type: SOCK_DGRAM)
        defer { close(udp) }
        var random = SystemRandomNumberGenerator()
        for round in 0..<5 {
            for _ in 0..<200 {
                let junk = (0..<Int.random(in: 0...1500, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                _ = junk.withUnsafeBytes { send(udp, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            }
            // A legacy stream announcing a huge frame, and a native TCP stream doing the same.
            let badLegacy = try RawLegacySocket(port: legacy)
            badLegacy.sendRaw([0x00, 0x65, 0xff, 0xff, 0xff, 0xff])
            let badNative = try RawLegacySocket(port: DaemonProcess.port(fields["tcp"])!)
            badNative.sendRaw([0xff, 0xff, 0xff, 0xff, 1, 2, 3])
            let line = ["1,0.\(round)00000,0.500000,1", "1,0.\(round)00000,0.600000,3"]
            LegacyApps.draw(line, on: a, runner)
            drawn += line
            #expect(LegacyApps.waitScreens(runner, [a, b], equal: LegacyApps.screen(drawn)), "\(b)")
            // A native device draws in the same room; the legacy devices see its lines too.
            let stroke = StrokeID(UInt32(round + 1))
            pen.sendBatch([.point(StrokePoint(stroke: stroke, phase: .start, x: Int32(round), y: 0)),
                           .point(StrokePoint(stroke: stroke, phase: .end, x: Int32(round), y: 1))],
                          originSeq: UInt64(round + 1), author: penAuthor)
            // The app's line came in one or two batches (its 60 ms timer), then the pen's.
            guard case .batchAck(let acked, let roomSeq)? = pen.next(where: { if case .batchAck = $0 { true } else { false } }) else {
                Issue.record("the pen's batch was not acknowledged")
                return
            }
            #expect(acked == UInt64(round + 1) && roomSeq >= head + 2 && roomSeq <= head + 3)
            head = roomSeq
            drawn += ["1,0.00000\(round),0.000000,1", "1,0.00000\(round),0.000001,3"]
            #expect(LegacyApps.waitScreens(runner, [a, b], equal: LegacyApps.screen(drawn)), "\(b)")
            #expect(badLegacy.waitClosed(limitMicroseconds: 2_000_000))
            #expect(badNative.waitClosed(limitMicroseconds: 2_000_000))
        }
        // The watcher saw both devices' batches, in room order.
        var seen: [UInt64] = []
        while let (batch, _) = watcher.nextRoomBatch(limitMicroseconds: 500_000) { seen.append(batch.roomSeq) }
        #expect(seen == Array(1...head))
        let metrics = try fetchMetrics(port: DaemonProcess.port(fields["metrics"])!)
        #expect((metricValue(metrics, "inkwire_errors_total{kind=\"legacy_frame\"}") ?? 0) == 5)
        #expect((metricValue(metrics, "inkwire_errors_total{kind=\"bad_frame\"}") ?? 0) == 5)
        let garbage = (metricValue(metrics, "inkwire_errors_total{kind=\"garbage_datagram\"}") ?? 0)
            + (metricValue(metrics, "inkwire_errors_total{kind=\"oversized_datagram\"}") ?? 0)
        #expect(garbage > 0)
        #expect(metricValue(metrics, "inkwire_sessions{transport=\"legacy\"}") == 2)
        #expect(daemon.log.contains("reason=\"bad frame: frame of command 101 announces 4294967295 bytes"))
    }
}
