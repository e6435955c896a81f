import Glibc
import InkBenchSupport
import InkCodec
import LegacyAppModel
import Testing

/// The real daemon with HYWhiteboard app models (and hostile raw sockets) on loopback.
@Suite struct DaemonLegacyTests {
    /// Fast legacy timing so silent-peer tests take well under 2 s.
    static let fastTiming = ["--legacy-heartbeat-ms", "100", "--legacy-timeout-ms", "600", "--legacy-screen-wait-ms", "300"]

    static func start(_ tag: String, extra: [String] = [], dataDir: String? = nil) throws -> (DaemonProcess, UInt16) {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson"] + extra,
                                       dataDir: dataDir, tag: tag)
        let fields = try daemon.ready()
        return (daemon, daemon.legacyPort(fields))
    }

    static let stroke = ["3,2,3", "1,0.100000,0.200000,1", "1,0.110000,-0.013333,2", "1,1.020000,0.220000,3"]
    static let reply = ["1,0.500000,0.500000,1", "1,0.600000,0.600000,3"]

    @Test func twoAppsSeeEachOthersStrokesUndoRedoAndClear() throws {
        let (daemon, port) = try Self.start("pair")
        defer { withExtendedLifetime(daemon) {} }
        let runner = LegacyAppRunner(seed: 11)
        let a = try runner.connect("a", port: port)
        let b = try runner.connect("b", port: port)
        #expect(LegacyApps.waitUp(runner, [a, b]))
        runner.run(limitMicroseconds: 1_000_000)  // the daemon writes nothing for 1 s
        LegacyApps.draw(Self.stroke, on: a, runner)
        let first = LegacyApps.screen(Self.stroke)
        #expect(LegacyApps.waitScreens(runner, [a, b], equal: first))
        // B draws back with its own pen (the initial one), not A's red it received.
        LegacyApps.draw(Self.reply, on: b, runner)
        let both = LegacyAppScreen(lines: first.lines + LegacyApps.screen(Self.reply).lines)
        #expect(LegacyApps.waitScreens(runner, [a, b], equal: both))
        #expect(b.model.pen == .initial && a.model.pen == PenStyle(color: 2, width: 3))
        // A undoes its line (B's is on top of A's screen), redoes it, clears.
        LegacyApps.draw(["4"], on: a, runner)
        #expect(LegacyApps.waitScreens(runner, [a, b], equal: LegacyApps.screen(Self.reply)), "\(a) \(b)")
        LegacyApps.draw(["5"], on: a, runner)
        #expect(runner.run(limitMicroseconds: 5_000_000) { [a, b].allSatisfy { $0.model.screen.interleaves([first, LegacyApps.screen(Self.reply)]) } })
        LegacyApps.draw(["6"], on: a, runner)
        #expect(LegacyApps.waitScreens(runner, [a, b], equal: LegacyAppScreen()))
        for app in [a, b] { #expect(app.isConnected && app.model.desync == nil, "\(app)") }
    }

    @Test func threeAppsKeepTheirOwnPens() throws {
        let (daemon, port) = try Self.start("three")
        defer { withExtendedLifetime(daemon) {} }
        let runner = LegacyAppRunner(seed: 12)
        let apps = try (0..<3).map { try runner.connect("app-\($0)", port: port) }
        #expect(LegacyApps.waitUp(runner, apps))
        runner.run(limitMicroseconds: 1_000_000)
        LegacyApps.draw(Self.stroke, on: apps[0], runner)
        #expect(LegacyApps.waitScreens(runner, apps, equal: LegacyApps.screen(Self.stroke)))
        // App 2 never picked a pen: after app 0's red line it still draws with the initial pen.
        let line = ["1,0.300000,0.300000,1", "1,0.300000,0.400000,3"]
        LegacyApps.draw(line, on: apps[2], runner)
        let expected = LegacyAppScreen(lines: LegacyApps.screen(Self.stroke).lines + LegacyApps.screen(line).lines)
        #expect(LegacyApps.waitScreens(runner, apps, equal: expected), "\(apps)")
        #expect(expected.lines[1].color == 0 && expected.lines[1].width == 1)
    }

    @Test func lateAppReceivesTheBoard() throws {
        let (daemon, port) = try Self.start("late")
        defer { withExtendedLifetime(daemon) {} }
        let runner = LegacyAppRunner(seed: 13)
        let a = try runner.connect("a", port: port)
        #expect(LegacyApps.waitUp(runner, [a]))
        LegacyApps.draw(Self.stroke + ["1,0.700000,0.700000,1", "1,0.710000,0.720000,3"], on: a, runner)
        let c = try runner.connect("c", port: port)
        #expect(LegacyApps.waitScreens(runner, [a, c], equal: a.model.screen), "\(c)")
        #expect(c.model.framesDropped == 0, "nothing is sent before the app's screen is up")
    }

    @Test func silentDevicesAreDroppedAndHeartbeatsKeepAnAppAlive() throws {
        let (daemon, port) = try Self.start("silent", extra: Self.fastTiming)
        defer { withExtendedLifetime(daemon) {} }
        let silent = try RawLegacySocket(port: port)
        let talker = try RawLegacySocket(port: port)
        var config = HYWhiteboardApp.Configuration()
        config.heartbeatInterval = .milliseconds(100)
        config.livenessInterval = .milliseconds(500)
        let runner = LegacyAppRunner(seed: 14)
        let app = try runner.connect("app", port: port, configuration: config)
        // `talker` sends data but no heartbeats: data frames do not keep a link alive.
        let started = monotonicMicroseconds()
        while monotonicMicroseconds() - started < 1_000_000 {
            talker.send(["1,0.100000,0.100000,1"])
            runner.run(limitMicroseconds: 50_000)
        }
        #expect(silent.waitClosed(limitMicroseconds: 500_000))
        #expect(talker.waitClosed(limitMicroseconds: 500_000))
        // The app heard the daemon's heartbeats (every 100 ms) and kept the link.
        #expect(app.isConnected, "\(app)")
        #expect(daemon.log.contains("reason=\"no heartbeat for 600 ms\""))
    }

    @Test func historySurvivesARestart() throws {
        let directory = DaemonProcess.scratchDirectory("restart")
        let drawn: LegacyAppScreen
        do {
            let (daemon, port) = try Self.start("restart", dataDir: directory)
            defer { withExtendedLifetime(daemon) {} }
            let runner = LegacyAppRunner(seed: 15)
            let a = try runner.connect("a", port: port)
            let b = try runner.connect("b", port: port)
            #expect(LegacyApps.waitUp(runner, [a, b]))
            runner.run(limitMicroseconds: 1_000_000)
            LegacyApps.draw(Self.stroke, on: a, runner)
            drawn = a.model.screen
            #expect(LegacyApps.waitScreens(runner, [b], equal: drawn))
            daemon.signal(SIGTERM)
            #expect(daemon.waitExit() == 0)
        }
        let (daemon, port) = try Self.start("restart", dataDir: directory)
        defer { withExtendedLifetime(daemon) {} }
        #expect(daemon.log.contains("msg=\"room reopened\" room=lesson"))
        let runner = LegacyAppRunner(seed: 16)
        let c = try runner.connect("c", port: port)
        #expect(LegacyApps.waitScreens(runner, [c], equal: drawn), "\(c)")
    }
}
