import Glibc
import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

/// The real daemon writes a room snapshot every `RelayDriver.snapshotEveryBatches` batches,
/// compacts the log with `--retain board`, and restarts from the snapshot plus the tail.
@Suite struct DaemonSnapshotTests {
    /// A late viewer's sync: the digest the daemon sends with `syncDone`.
    static func lateDigest(_ ports: DaemonNativeTests.Ports) throws -> UInt64? {
        let late = try NativeTestClient(.tcp, port: ports.tcp)
        guard DaemonNativeTests.joined(late, user: "late", role: .viewer) != nil else { return nil }
        guard case .syncDone(_, _, let digest)? = late.next(limitMicroseconds: 10_000_000, where: { if case .syncDone = $0 { true } else { false } }) else {
            return nil
        }
        return digest
    }

    @Test func snapshotCompactsAndRestartRestoresTheSameBoard() throws {
        let (daemon, ports) = try DaemonNativeTests.start("snapshot", extra: ["--retain", "board"])
        defer { withExtendedLifetime(daemon) {} }
        let device = try NativeTestClient(.tcp, port: ports.tcp)
        let author = try #require(DaemonNativeTests.joined(device, user: "pen", role: .teacher))
        let every = RelayDriver.snapshotEveryBatches
        let count = every + 10
        for i in 1...count {
            let s = StrokeID(UInt32(i))
            device.sendBatch([.point(StrokePoint(stroke: s, phase: .start, x: Int32(i), y: 7)),
                              .point(StrokePoint(stroke: s, phase: .end, x: Int32(i) + 50, y: 9))], originSeq: UInt64(i), author: author)
        }
        let last = device.next(limitMicroseconds: 30_000_000, where: { if case .batchAck(let o, _) = $0 { o == UInt64(count) } else { false } })
        #expect(last == .batchAck(originSeq: UInt64(count), roomSeq: UInt64(count)))
        #expect(daemon.waitForLine(containing: "msg=\"room snapshot written\" room=lesson room_seq=\(every)") != nil, "\(daemon.log)")
        let before = try #require(try Self.lateDigest(ports))
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)

        let (again, morePorts) = try DaemonNativeTests.start("snapshot", extra: ["--data-dir", daemon.dataDir + "/data", "--retain", "board"])
        defer { withExtendedLifetime(again) {} }
        // Only the tail after the snapshot is read back: the covered batches were compacted.
        #expect(again.log.contains("msg=\"room reopened\" room=lesson batches=10 "), "\(again.log)")
        #expect(try Self.lateDigest(morePorts) == before)
    }

    @Test func clearWritesASnapshotAndRestartReadsNothingBefore() throws {
        let (daemon, ports) = try DaemonNativeTests.start("clear", extra: ["--retain", "board"])
        defer { withExtendedLifetime(daemon) {} }
        let device = try NativeTestClient(.tcp, port: ports.tcp)
        let author = try #require(DaemonNativeTests.joined(device, user: "pen", role: .teacher))
        let strokes = RelayDriver.snapshotAfterShrinkBatches + 4
        for i in 1...strokes {
            let s = StrokeID(UInt32(i))
            device.sendBatch([.point(StrokePoint(stroke: s, phase: .start, x: Int32(i), y: 7)),
                              .point(StrokePoint(stroke: s, phase: .end, x: Int32(i) + 50, y: 9))], originSeq: UInt64(i), author: author)
        }
        device.sendBatch([.clear], originSeq: UInt64(strokes + 1), author: author)
        device.sendBatch([.point(StrokePoint(stroke: StrokeID(999), phase: .start, x: 1, y: 2))], originSeq: UInt64(strokes + 2), author: author)
        let last = device.next(limitMicroseconds: 10_000_000, where: { if case .batchAck(let o, _) = $0 { o == UInt64(strokes + 2) } else { false } })
        #expect(last == .batchAck(originSeq: UInt64(strokes + 2), roomSeq: UInt64(strokes + 2)))
        #expect(daemon.waitForLine(containing: "msg=\"room snapshot written\" room=lesson room_seq=") != nil, "\(daemon.log)")
        let before = try #require(try Self.lateDigest(ports))
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)

        let (again, morePorts) = try DaemonNativeTests.start("clear", extra: ["--data-dir", daemon.dataDir + "/data", "--retain", "board"])
        defer { withExtendedLifetime(again) {} }
        // The clear's snapshot replaced the strokes before it; at most the batch after it is read.
        #expect(again.log.contains("msg=\"room reopened\" room=lesson batches=1 ") || again.log.contains("msg=\"room reopened\" room=lesson batches=0 "), "\(again.log)")
        #expect(try Self.lateDigest(morePorts) == before)
    }
}
