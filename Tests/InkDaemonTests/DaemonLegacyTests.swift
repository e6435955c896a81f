import Glibc
import Testing

/// The real daemon with legacy HYWhiteboard devices on loopback.
@Suite struct DaemonLegacyTests {
    /// Fast legacy timing so silent-peer tests take well under 2 s.
    static let fastTiming = ["--legacy-heartbeat-ms", "100", "--legacy-timeout-ms", "600"]

    static func start(_ tag: String, extra: [String] = [], dataDir: String? = nil) throws -> (DaemonProcess, UInt16) {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson"] + extra,
                                       dataDir: dataDir, tag: tag)
        let fields = try daemon.ready()
        return (daemon, daemon.legacyPort(fields))
    }

    static let stroke = ["3,2,3", "1,0.100000,0.200000,1", "1,0.110000,-0.013333,2", "1,1.020000,0.220000,3"]

    @Test func twoDevicesSeeEachOthersStrokesExactly() throws {
        let (daemon, port) = try Self.start("pair")
        defer { withExtendedLifetime(daemon) {} }
        let a = try LegacyTestClient(port: port)
        let b = try LegacyTestClient(port: port)
        #expect(daemon.waitForLine(containing: "author=2") != nil)
        a.send(Self.stroke)
        #expect(b.receive(count: 4) == Self.stroke)
        // B draws back with the initial pen; A's view of B's pen is still initial, so no style.
        let reply = ["1,0.500000,0.500000,1", "1,0.600000,0.600000,3"]
        b.send(reply)
        #expect(a.receive(count: 2) == reply)
        // Undo acts on the author's last line and reaches the other device as the app's undo.
        a.send(["4"])
        #expect(b.receive(count: 1) == ["4"])
        a.send(["5", "6"])
        #expect(b.receive(count: 2) == ["5", "6"])
        #expect(a.drain(microseconds: 200_000) == [])
        #expect(b.drain(microseconds: 0) == [])
    }

    @Test func threeDevicesEachSeeTheOthers() throws {
        let (daemon, port) = try Self.start("three")
        defer { withExtendedLifetime(daemon) {} }
        let devices = try (0..<3).map { _ in try LegacyTestClient(port: port) }
        #expect(daemon.waitForLine(containing: "author=3") != nil)
        devices[0].send(Self.stroke)
        #expect(devices[1].receive(count: 4) == Self.stroke)
        #expect(devices[2].receive(count: 4) == Self.stroke)
        devices[2].send(["1,0.300000,0.300000,1", "1,0.300000,0.400000,3"])
        // The apps' pen is pen(2,3) from device 0; device 2 draws with the initial pen.
        let expected = ["3,0,1", "1,0.300000,0.300000,1", "1,0.300000,0.400000,3"]
        #expect(devices[0].receive(count: 2) == ["1,0.300000,0.300000,1", "1,0.300000,0.400000,3"])
        #expect(devices[1].receive(count: 3) == expected)
    }

    @Test func lateDeviceReceivesTheBoard() throws {
        let (daemon, port) = try Self.start("late")
        defer { withExtendedLifetime(daemon) {} }
        let a = try LegacyTestClient(port: port)
        #expect(daemon.waitForLine(containing: "author=1") != nil)
        a.send(Self.stroke)
        a.send(["1,0.700000,0.700000,1", "1,0.710000,0.720000,3"])
        // Give the daemon the first batches before C connects.
        usleep(200_000)
        let c = try LegacyTestClient(port: port)
        let board = c.receive(count: 8)
        #expect(board == ["6"] + Self.stroke + ["1,0.700000,0.700000,1", "1,0.710000,0.720000,3"])
    }

    @Test func silentDeviceIsDroppedAndHeartbeatsKeepOneAlive() throws {
        let (daemon, port) = try Self.start("silent", extra: Self.fastTiming)
        defer { withExtendedLifetime(daemon) {} }
        let silent = try LegacyTestClient(port: port)
        let chatty = try LegacyTestClient(port: port)
        let talker = try LegacyTestClient(port: port)
        let started = monotonicMicroseconds()
        // `talker` sends data but no heartbeats: data frames do not keep a link alive.
        var alive = true
        while monotonicMicroseconds() - started < 1_000_000 {
            chatty.sendHeartbeat()
            talker.send(["1,0.100000,0.100000,1"])
            _ = chatty.drain(microseconds: 50_000)
            alive = alive && !chatty.peerClosed
        }
        #expect(silent.waitClosed(limitMicroseconds: 500_000))
        #expect(talker.waitClosed(limitMicroseconds: 500_000))
        #expect(alive && !chatty.peerClosed)
        // The daemon sent heartbeats every 100 ms.
        #expect(chatty.heartbeats >= 5)
        #expect(daemon.log.contains("reason=\"no heartbeat for 600 ms\""))
    }

    @Test func historySurvivesARestart() throws {
        let directory = DaemonProcess.scratchDirectory("restart")
        do {
            let (daemon, port) = try Self.start("restart", dataDir: directory)
            defer { withExtendedLifetime(daemon) {} }
            let a = try LegacyTestClient(port: port)
            let b = try LegacyTestClient(port: port)
            #expect(daemon.waitForLine(containing: "author=2") != nil)
            a.send(Self.stroke)
            #expect(b.receive(count: 4) == Self.stroke)
            daemon.signal(SIGTERM)
            #expect(daemon.waitExit() == 0)
        }
        let (daemon, port) = try Self.start("restart", dataDir: directory)
        defer { withExtendedLifetime(daemon) {} }
        #expect(daemon.log.contains("msg=\"room reopened\" room=lesson"))
        let c = try LegacyTestClient(port: port)
        #expect(c.receive(count: 5) == ["6"] + Self.stroke)
    }
}
