import Glibc
import InkBenchSupport
import LegacyAppModel
import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

/// The real daemon with native devices (UDP ARQ and framed TCP) and legacy ones on loopback.
@Suite struct DaemonNativeTests {
    struct Ports {
        let udp: UInt16, tcp: UInt16, legacy: UInt16
    }

    static func start(_ tag: String, extra: [String] = []) throws -> (DaemonProcess, Ports) {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson"] + extra, tag: tag)
        let fields = try daemon.ready()
        return (daemon, Ports(udp: DaemonProcess.port(fields["udp"])!, tcp: DaemonProcess.port(fields["tcp"])!, legacy: daemon.legacyPort(fields)))
    }

    static func joined(_ client: NativeTestClient, user: String, role: MemberRole, token: String = "") -> AuthorID? {
        client.join(room: "lesson", user: user, role: role, token: token)
        // 10 s: a daemon just restarted on a machine running the whole suite can take seconds to answer.
        guard case .joinAccepted(let member, _, _, _)? = client.next(limitMicroseconds: 10_000_000, where: {
            if case .joinAccepted = $0 { true } else if case .joinRefused = $0 { true } else { false }
        }) else {
            return nil
        }
        return member
    }

    static let stroke: [Command] = [
        .penStyle(PenStyle(color: 2, width: 3)!),
        .point(StrokePoint(stroke: StrokeID(1), phase: .start, x: 100_000, y: 200_000)),
        .point(StrokePoint(stroke: StrokeID(1), phase: .move, x: 110_000, y: -13_333)),
        .point(StrokePoint(stroke: StrokeID(1), phase: .end, x: 1_020_000, y: 220_000)),
    ]
    static let strokeAsLegacy = ["3,2,3", "1,0.100000,0.200000,1", "1,0.110000,-0.013333,2", "1,1.020000,0.220000,3"]

    @Test func nativeSenderReachesNativeAndLegacyWatchers() throws {
        let (daemon, ports) = try Self.start("native")
        defer { withExtendedLifetime(daemon) {} }
        let teacher = try NativeTestClient(.udp, port: ports.udp)
        let author = try #require(Self.joined(teacher, user: "teacher", role: .teacher), "\(daemon.log)")
        let udpViewer = try NativeTestClient(.udp, port: ports.udp)
        #expect(Self.joined(udpViewer, user: "v1", role: .viewer) != nil)
        let tcpViewer = try NativeTestClient(.tcp, port: ports.tcp)
        #expect(Self.joined(tcpViewer, user: "v2", role: .viewer) != nil)
        let runner = LegacyAppRunner(seed: 21)
        let legacy = try runner.connect("app", port: ports.legacy)
        usleep(100_000)
        teacher.sendBatch(Self.stroke, originSeq: 1, author: author)
        #expect(teacher.next(where: { if case .batchAck = $0 { true } else { false } }) == .batchAck(originSeq: 1, roomSeq: 1))
        for viewer in [udpViewer, tcpViewer] {
            let delivered = viewer.nextRoomBatch()
            #expect(delivered?.0.roomSeq == 1)
            #expect(delivered?.0.author == author)
            #expect(delivered?.1 == Self.stroke)
        }
        let shown = LegacyApps.screen(Self.strokeAsLegacy)
        #expect(LegacyApps.waitScreens(runner, [legacy], equal: shown), "\(legacy)")
        // A viewer may not draw: refused to it alone.
        udpViewer.sendBatch(Self.stroke, originSeq: 1, author: author)
        guard case .error(let code, let originSeq, _)? = udpViewer.next(where: { if case .error = $0 { true } else { false } }) else {
            Issue.record("viewer's batch not refused")
            return
        }
        #expect(code == .permissionDenied && originSeq == 1)
        #expect(tcpViewer.nextRoomBatch(limitMicroseconds: 300_000) == nil)
        runner.run(limitMicroseconds: 300_000)
        #expect(legacy.model.screen == shown && legacy.isConnected)
    }

    @Test func legacySenderReachesNativeWatchers() throws {
        let (daemon, ports) = try Self.start("legacy-send")
        defer { withExtendedLifetime(daemon) {} }
        let viewer = try NativeTestClient(.tcp, port: ports.tcp)
        #expect(Self.joined(viewer, user: "watcher", role: .viewer) != nil)
        let runner = LegacyAppRunner(seed: 22)
        let app = try runner.connect("app", port: ports.legacy)
        #expect(LegacyApps.waitUp(runner, [app]))
        LegacyApps.draw(Self.strokeAsLegacy, on: app, runner)
        // The app sends its 60 ms buffer at a time: the commands come in a few batches.
        var commands: [Command] = []
        while commands.count < Self.stroke.count, let delivered = viewer.nextRoomBatch() { commands += delivered.1 }
        #expect(commands == Self.stroke)
    }

    @Test func dualStackListenersTakeIPv4AndIPv6() throws {
        let daemon = try DaemonProcess(["--udp", "[::]:0", "--tcp", "[::]:0", "--legacy", "[::]:0=lesson"], tag: "dual")
        let fields = try daemon.ready()
        #expect(fields["udp"]?.hasPrefix("[::]:") == true)
        let pen = try NativeTestClient(.udp, port: DaemonProcess.port(fields["udp"])!)
        let author = try #require(Self.joined(pen, user: "pen", role: .presenter))
        let v6 = try NativeTestClient(.tcp, port: DaemonProcess.port(fields["tcp"])!, ipv6: true)
        #expect(Self.joined(v6, user: "v6", role: .viewer) != nil)
        let runner = LegacyAppRunner(seed: 23)
        let app = try runner.connect("app", port: daemon.legacyPort(fields))
        usleep(100_000)
        pen.sendBatch(Self.stroke, originSeq: 1, author: author)
        #expect(v6.nextRoomBatch()?.1 == Self.stroke)
        #expect(LegacyApps.waitScreens(runner, [app], equal: LegacyApps.screen(Self.strokeAsLegacy)), "\(app)")
    }

    @Test func roamingDeviceKeepsItsSession() throws {
        let (daemon, ports) = try Self.start("roam")
        defer { withExtendedLifetime(daemon) {} }
        let device = try NativeTestClient(.udp, port: ports.udp)
        let author = try #require(Self.joined(device, user: "pen", role: .presenter))
        let watcher = try NativeTestClient(.tcp, port: ports.tcp)
        #expect(Self.joined(watcher, user: "watcher", role: .viewer) != nil)
        device.sendBatch(Array(Self.stroke.prefix(2)), originSeq: 1, author: author)
        #expect(device.next(where: { if case .batchAck = $0 { true } else { false } }) == .batchAck(originSeq: 1, roomSeq: 1))
        try device.roam()
        device.sendBatch(Array(Self.stroke.suffix(2)), originSeq: 2, author: author)
        #expect(device.next(where: { if case .batchAck = $0 { true } else { false } }) == .batchAck(originSeq: 2, roomSeq: 2))
        #expect(watcher.nextRoomBatch()?.1 == Array(Self.stroke.prefix(2)))
        #expect(watcher.nextRoomBatch()?.1 == Array(Self.stroke.suffix(2)))
        #expect(daemon.waitForLine(containing: "msg=\"session moved\"") != nil)
        #expect(!daemon.log.contains("msg=\"member left\""))
    }

    @Test func tokensAreCheckedWithClearReasons() throws {
        let directory = DaemonProcess.scratchDirectory("token")
        let secret = Array("a-school-secret-of-enough-bytes".utf8)
        writeFile(directory + "/secret", secret + [10])
        let (daemon, ports) = try Self.start("token", extra: ["--token-secret-file", directory + "/secret"])
        defer { withExtendedLifetime(daemon) {} }
        #expect(!daemon.log.contains("rooms are open"))
        let minter = TokenVerifier(secret: secret)!
        let good = minter.mint(JoinClaims(room: "lesson", user: "ada", role: .presenter, expiresAt: 4_000_000_000))
        let expired = minter.mint(JoinClaims(room: "lesson", user: "ada", role: .presenter, expiresAt: 1_000))
        let cases: [(String, MemberRole, JoinRefusal?)] = [
            ("", .presenter, .badToken),
            ("iw1.garbage.garbage", .presenter, .badToken),
            (expired, .presenter, .expiredToken),
            (good, .teacher, .roleNotAllowed),
            (good, .viewer, nil),
        ]
        for (token, role, refusal) in cases {
            let client = try NativeTestClient(.tcp, port: ports.tcp)
            client.join(room: "lesson", user: "ada", role: role, token: token)
            let answer = client.next(where: { if case .joinAccepted = $0 { true } else if case .joinRefused = $0 { true } else { false } })
            if let refusal {
                guard case .joinRefused(let reason, let text)? = answer else {
                    Issue.record("expected \(refusal), got \(String(describing: answer))")
                    continue
                }
                #expect(reason == refusal)
                #expect(!text.isEmpty)
            } else {
                guard case .joinAccepted? = answer else {
                    Issue.record("expected a join, got \(String(describing: answer))")
                    continue
                }
            }
        }
        #expect(daemon.log.contains("msg=\"join refused\""))
        // SIGHUP reads a new secret: old tokens stop working, new ones work.
        let newSecret = Array("the-next-term-secret-0123456789".utf8)
        writeFile(directory + "/secret", newSecret)
        daemon.signal(SIGHUP)
        #expect(daemon.waitForLine(containing: "msg=\"reloaded\"") != nil)
        let fresh = TokenVerifier(secret: newSecret)!.mint(JoinClaims(room: "lesson", user: "ada", role: .viewer, expiresAt: 4_000_000_000))
        for (token, accepted) in [(good, false), (fresh, true)] {
            let client = try NativeTestClient(.tcp, port: ports.tcp)
            client.join(room: "lesson", user: "ada", role: .viewer, token: token)
            let answer = client.next(where: { if case .joinAccepted = $0 { true } else if case .joinRefused = $0 { true } else { false } })
            if case .joinAccepted? = answer { #expect(accepted) } else { #expect(!accepted && answer != nil) }
        }
    }

    @Test func shutdownSaysGoodbyeAndKeepsTheLog() throws {
        let (daemon, ports) = try Self.start("goodbye")
        defer { withExtendedLifetime(daemon) {} }
        defer { withExtendedLifetime(daemon) {} }
        let device = try NativeTestClient(.udp, port: ports.udp)
        let author = try #require(Self.joined(device, user: "pen", role: .presenter))
        device.sendBatch(Self.stroke, originSeq: 1, author: author)
        #expect(device.next(where: { if case .batchAck = $0 { true } else { false } }) == .batchAck(originSeq: 1, roomSeq: 1))
        daemon.signal(SIGTERM)
        guard case .goingAway(let reason, _)? = device.next(where: { if case .goingAway = $0 { true } else { false } }) else {
            Issue.record("no goodbye")
            return
        }
        #expect(reason == .shuttingDown)
        #expect(daemon.waitExit() == 0)
        let (again, morePorts) = try Self.start("goodbye", extra: ["--data-dir", daemon.dataDir + "/data"])
        defer { withExtendedLifetime(again) {} }
        defer { withExtendedLifetime(again) {} }
        #expect(again.log.contains("msg=\"room reopened\" room=lesson batches=1"))
        let late = try NativeTestClient(.tcp, port: morePorts.tcp)
        #expect(Self.joined(late, user: "late", role: .viewer) != nil)
        #expect(late.next(where: { if case .syncDone = $0 { true } else { false } }) != nil)
    }
}
