import Glibc
import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

/// `--max-room-history-bytes` and `--room-idle-expiry` through the real daemon.
@Suite struct DaemonHistoryLimitTests {
    static func start(_ tag: String, _ extra: [String]) throws -> (DaemonProcess, DaemonNativeTests.Ports, metrics: UInt16) {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson", "--metrics", "127.0.0.1:0"] + extra, tag: tag)
        let fields = try daemon.ready()
        let ports = DaemonNativeTests.Ports(udp: DaemonProcess.port(fields["udp"])!, tcp: DaemonProcess.port(fields["tcp"])!, legacy: daemon.legacyPort(fields))
        return (daemon, ports, DaemonProcess.port(fields["metrics"])!)
    }

    @Test func flagsParse() throws {
        let config = try DaemonConfig.parse(arguments: ["--max-room-history-bytes", "65536", "--room-idle-expiry", "12h"], environment: [:], readFile: { _ in nil })
        #expect(config.maxRoomHistoryBytes == 65536)
        #expect(config.roomIdleExpiryMs == 12 * 3600 * 1000)
        #expect(try DaemonConfig.parse(arguments: ["--room-idle-expiry", "90"], environment: [:], readFile: { _ in nil }).roomIdleExpiryMs == 90_000)
        #expect(try DaemonConfig.parse(arguments: [], environment: ["INKWIRE_ROOM_IDLE_EXPIRY": "0"], readFile: { _ in nil }).roomIdleExpiryMs == 0)
        #expect(try DaemonConfig.parse(arguments: [], environment: [:], readFile: { _ in nil }).roomIdleExpiryMs == 30 * 86_400_000)
        for bad in [["--room-idle-expiry", "3w"], ["--room-idle-expiry", "-1s"], ["--max-room-history-bytes", "12"]] {
            #expect(throws: ConfigError.self) { try DaemonConfig.parse(arguments: bad, environment: [:], readFile: { _ in nil }) }
        }
    }

    /// `--retain full`: a batch past the limit gets `historyFull`, reaches nobody, is logged and
    /// counted; a legacy device whose stroke is refused is closed with a logged reason.
    @Test func aBatchPastTheHistoryLimitIsRefusedToItsAuthor() throws {
        let (daemon, ports, metricsPort) = try Self.start("historyfull", ["--max-room-history-bytes", "16384", "--retain", "full"])
        defer { withExtendedLifetime(daemon) {} }
        let teacher = try NativeTestClient(.tcp, port: ports.tcp)
        let author = try #require(DaemonNativeTests.joined(teacher, user: "teacher", role: .teacher), "\(daemon.log)")
        let viewer = try NativeTestClient(.tcp, port: ports.tcp)
        #expect(DaemonNativeTests.joined(viewer, user: "pupil", role: .viewer) != nil)
        var refusedAt: UInt64?
        for originSeq in UInt64(1)...40 {
            teacher.sendBatch(DaemonDiskFullTests.bigStroke(Int(originSeq), points: 400), originSeq: originSeq, author: author)
            let reply = teacher.next(where: { m in if case .batchAck = m { true } else if case .error = m { true } else { false } })
            if case .error(let code, let seq, let text)? = reply {
                #expect(code == .historyFull && seq == originSeq, "\(code) \(text)")
                #expect(text.hasPrefix("room history is full (") && text.hasSuffix(" of 16384 bytes kept)"), "\(text)")
                refusedAt = originSeq
                break
            }
            #expect(reply == .batchAck(originSeq: originSeq, roomSeq: originSeq))
            #expect(viewer.nextRoomBatch()?.0.roomSeq == originSeq)
        }
        let refused = try #require(refusedAt, "nothing refused; log:\n\(daemon.log)")
        #expect(refused > 2)
        #expect(viewer.nextRoomBatch(limitMicroseconds: 300_000) == nil, "a refused batch reached a viewer")
        #expect(daemon.waitForLine(containing: "msg=\"batch refused: room history full\" room=lesson ") != nil)
        let metrics = try fetchMetrics(port: metricsPort)
        #expect(metricValue(metrics, "inkwire_refused_batches_total{reason=\"history_full\"}") == 1, "\(metrics)")

        // A device no app is: one frame after another, far more than any 60 ms of drawing.
        let legacy = try RawLegacySocket(port: ports.legacy)
        #expect(daemon.waitForLine(containing: "msg=\"legacy device joined\"") != nil)
        // A long line of the app's text commands (about 8 KB once encoded: more than the room has
        // left after refusing a 400-point stroke, whatever the codec's ratio).
        var line = ["3,2,3"]
        for i in 0..<1000 { line.append("1,0.\(100_000 + (i * 7919) % 800_000),0.\(100_000 + (i * 104_729) % 800_000),\(i == 0 ? 1 : (i == 999 ? 3 : 2))") }
        legacy.send(line)
        #expect(legacy.waitClosed(limitMicroseconds: 3_000_000))
        #expect(daemon.waitForLine(containing: "msg=\"legacy device closed: its batch was refused by the room log\" room=lesson ") != nil, "\(daemon.log)")
        // Nothing past the limit was stored: the room head did not move.
        teacher.sendBatch(DaemonDiskFullTests.bigStroke(Int(refused), points: 400), originSeq: refused, author: author)
        if case .error(let code, _, _)? = teacher.next(where: { if case .error = $0 { true } else { false } }) {
            #expect(code == .historyFull)
        } else {
            Issue.record("no refusal for a batch past the limit")
        }
    }

    /// `--retain board`: reaching the limit compacts the room (a snapshot drops the batches it
    /// covers), so drawing goes on.
    @Test func withBoardRetentionTheLimitCompactsInsteadOfRefusing() throws {
        let (daemon, ports, _) = try Self.start("historycompact", ["--max-room-history-bytes", "16384", "--retain", "board"])
        defer { withExtendedLifetime(daemon) {} }
        let teacher = try NativeTestClient(.tcp, port: ports.tcp)
        let author = try #require(DaemonNativeTests.joined(teacher, user: "teacher", role: .teacher), "\(daemon.log)")
        for originSeq in UInt64(1)...30 {
            teacher.sendBatch(DaemonDiskFullTests.bigStroke(Int(originSeq), points: 400), originSeq: originSeq, author: author)
            let reply = teacher.next(where: { m in if case .batchAck = m { true } else if case .error = m { true } else { false } })
            #expect(reply == .batchAck(originSeq: originSeq, roomSeq: originSeq), "\(daemon.log)")
        }
        #expect(daemon.log.contains("msg=\"room snapshot written\" room=lesson "))
        #expect(!daemon.log.contains("history full"))
    }

    /// A room with no batch and no member for `--room-idle-expiry` is deleted; one with a member is kept.
    @Test func idleRoomsExpireOnlyWhenEmpty() throws {
        let (daemon, ports, metricsPort) = try Self.start("expiry", ["--room-idle-expiry", "1s"])
        defer { withExtendedLifetime(daemon) {} }
        let teacher = try NativeTestClient(.tcp, port: ports.tcp)
        let author = try #require(DaemonNativeTests.joined(teacher, user: "teacher", role: .teacher), "\(daemon.log)")
        teacher.sendBatch(DaemonNativeTests.stroke, originSeq: 1, author: author)
        #expect(teacher.next(where: { if case .batchAck = $0 { true } else { false } }) == .batchAck(originSeq: 1, roomSeq: 1))
        // Present (even silent) members keep the room.
        teacher.idle(microseconds: 2_500_000)
        #expect(!daemon.log.contains("room expired"))
        teacher.send(.leave)
        #expect(daemon.waitForLine(containing: "msg=\"room expired: idle, its history deleted\" room=lesson", limitMicroseconds: 5_000_000) != nil, "\(daemon.log)")
        let metrics = try fetchMetrics(port: metricsPort)
        #expect(metricValue(metrics, "inkwire_rooms_expired_total") == 1)
        // A new join starts the room afresh: empty log, empty board.
        let again = try NativeTestClient(.tcp, port: ports.tcp)
        again.join(room: "lesson", user: "teacher", role: .teacher)
        guard case .joinAccepted(_, _, let head, _)? = again.next(where: { if case .joinAccepted = $0 { true } else { false } }) else {
            Issue.record("no joinAccepted")
            return
        }
        #expect(head == 0)
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)
        let restarted = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--data-dir", daemon.dataDir + "/data"], tag: "expiry")
        _ = try restarted.ready()
        #expect(!restarted.log.contains("msg=\"room reopened\" room=lesson"), "\(restarted.log)")
    }
}
