import Glibc
import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

/// `--retain board`: when most points logged since the last snapshot belong to strokes that
/// are gone (here: undone strokes that a new stroke made unredoable), the daemon compacts at
/// once; the stored history shrinks and a restart serves the same board.
@Suite struct DaemonCompactionTests {
    static func stroke(_ id: Int, points: Int) -> [Command] {
        (0..<points).map { i in
            .point(StrokePoint(stroke: StrokeID(UInt32(id)), phase: i == 0 ? .start : (i == points - 1 ? .end : .move),
                               x: Int32(id * 1000 + i * 37 % 500), y: Int32(i * i % 997)))
        }
    }

    @Test func unredoableUndoneStrokesAreCompactedAway() throws {
        let (daemon, ports, metricsPort) = try DaemonHistoryLimitTests.start("undocompact", ["--retain", "board"])
        defer { withExtendedLifetime(daemon) {} }
        let teacher = try NativeTestClient(.tcp, port: ports.tcp)
        let author = try #require(DaemonNativeTests.joined(teacher, user: "teacher", role: .teacher), "\(daemon.log)")
        var originSeq: UInt64 = 0
        func send(_ commands: [Command]) {
            originSeq += 1
            teacher.sendBatch(commands, originSeq: originSeq, author: author)
        }
        // 14 short strokes, 6 long ones; the long ones undone (still redoable: no compaction).
        for i in 1...20 { send(Self.stroke(i, points: i <= 14 ? 20 : 300)) }
        for s in (15...20).reversed() { send([.undo(StrokeID(UInt32(s)))]) }
        #expect(teacher.next(limitMicroseconds: 10_000_000, where: { $0 == .batchAck(originSeq: originSeq, roomSeq: originSeq) }) != nil)
        teacher.idle(microseconds: 1_100_000)  // the gauges refresh every second
        let before = try #require(metricValue(try fetchMetrics(port: metricsPort), "inkwire_history_bytes"))
        #expect(!daemon.log.contains("room snapshot written"))
        // A new stroke discards the redo stack: the six long strokes can never come back.
        send(Self.stroke(21, points: 20))
        #expect(teacher.next(limitMicroseconds: 10_000_000, where: { $0 == .batchAck(originSeq: originSeq, roomSeq: originSeq) }) != nil)
        #expect(daemon.waitForLine(containing: "msg=\"room snapshot written\" room=lesson room_seq=\(originSeq)") != nil, "\(daemon.log)")
        teacher.idle(microseconds: 1_100_000)
        let after = try #require(metricValue(try fetchMetrics(port: metricsPort), "inkwire_history_bytes"))
        #expect(after == 0 && before > 0, "history bytes \(before) -> \(after)")
        let digest = try #require(try DaemonSnapshotTests.lateDigest(ports))
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)

        let (again, morePorts) = try DaemonNativeTests.start("undocompact", extra: ["--data-dir", daemon.dataDir + "/data", "--retain", "board"])
        defer { withExtendedLifetime(again) {} }
        #expect(again.log.contains("msg=\"room reopened\" room=lesson batches=0 room_seq=\(originSeq)"), "\(again.log)")
        #expect(try DaemonSnapshotTests.lateDigest(morePorts) == digest)
    }
}
