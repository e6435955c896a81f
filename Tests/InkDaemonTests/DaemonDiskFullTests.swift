import Glibc
import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

/// The real daemon on a real full disk: `--data-dir` is a 512 KiB tmpfs (needs root and
/// mount; skipped with a message otherwise: InkStoreTests covers the store alone).
/// Policy under test (docs/storage.md, "Full disk"): the live relay goes on, authors get no
/// acknowledgement until their batch is written, past the backlog bound new batches are
/// refused with `storageUnavailable` (never relayed), and once space returns everything
/// accepted is written and survives a restart.
@Suite struct DaemonDiskFullTests {
    /// One stroke of `points` pseudo-random points (a few KB in the binary codec).
    static func bigStroke(_ index: Int, points: Int = 2000) -> [Command] {
        var state = UInt64(index) &* 0x9E37_79B9_7F4A_7C15 | 1
        func next() -> Int32 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int32(truncatingIfNeeded: state >> 40) % 1_000_000
        }
        let stroke = StrokeID(UInt32(index))
        return (0..<points).map { i in
            .point(StrokePoint(stroke: stroke, phase: i == 0 ? .start : (i == points - 1 ? .end : .move), x: next(), y: next()))
        }
    }

    @Test func fullDiskRelaysLiveWithholdsAcksRefusesPastTheBacklogAndLosesNothing() throws {
        let scratch = DaemonProcess.scratchDirectory("diskfull")
        let dataDir = scratch + "/data"
        mkdir(dataDir, 0o755)
        defer { _ = system("rm -rf '\(scratch)'") }
        guard system("/bin/mount -t tmpfs -o size=512k tmpfs '\(dataDir)' 2>/dev/null") == 0 else {
            print("DaemonDiskFullTests: cannot mount a tmpfs here (not root?); skipped")
            return
        }
        defer { if system("/bin/umount '\(dataDir)' 2>/dev/null") != 0 { _ = system("/bin/umount -l '\(dataDir)'") } }
        try Self.scenario(scratch: scratch, dataDir: dataDir)
    }

    /// In its own function so every daemon is gone before the tmpfs is unmounted.
    static func scenario(scratch: String, dataDir: String) throws {
        let arguments = ["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson", "--metrics", "127.0.0.1:0",
                         "--data-dir", dataDir, "--store-backlog-ops", "30"]
        let daemon = try DaemonProcess(arguments, dataDir: scratch, tag: "diskfull")
        let fields = try daemon.ready()
        let tcp = try #require(DaemonProcess.port(fields["tcp"]))
        let metricsPort = try #require(DaemonProcess.port(fields["metrics"]))
        let teacher = try NativeTestClient(.tcp, port: tcp)
        let author = try #require(DaemonNativeTests.joined(teacher, user: "teacher", role: .teacher), "\(daemon.log)")
        let viewer = try NativeTestClient(.tcp, port: tcp)
        #expect(DaemonNativeTests.joined(viewer, user: "pupil", role: .viewer) != nil)

        var board = Board()
        var accepted: [UInt64] = []  // originSeqs the daemon took, in room order
        var refused: [UInt64] = []
        var maxAcked: UInt64 = 0
        /// Takes the teacher's acks and errors; returns the error for `originSeq`, if any.
        func teacherPoll(_ limit: UInt64) -> ServerMessage? {
            while let message = teacher.next(limitMicroseconds: limit, where: { m in
                if case .batchAck = m { true } else if case .error = m { true } else { false }
            }) {
                if case .batchAck(_, let roomSeq) = message { maxAcked = max(maxAcked, roomSeq) }
                if case .error = message { return message }
            }
            return nil
        }
        /// Sends batch `originSeq`; true when the viewer got it live, false when it was refused.
        func send(_ originSeq: UInt64) -> Bool? {
            teacher.sendBatch(bigStroke(Int(originSeq)), originSeq: originSeq, author: author)
            let deadline = monotonicMicroseconds() + 5_000_000
            while monotonicMicroseconds() < deadline {
                if let (batch, commands) = viewer.nextRoomBatch(limitMicroseconds: 3_000) {
                    #expect(batch.roomSeq == UInt64(accepted.count + 1) && batch.author == author)
                    for command in commands { board.apply(command, author: batch.author) }
                    accepted.append(originSeq)
                    return true
                }
                if case .error(let code, let seq, let text)? = teacherPoll(3_000) {
                    #expect(code == .storageUnavailable && seq == originSeq, "\(code) \(seq) \(text)")
                    refused.append(originSeq)
                    return false
                }
            }
            return nil
        }

        // Fill the disk: every batch is relayed live until the backlog bound is reached.
        var originSeq: UInt64 = 0
        let started = monotonicMicroseconds()
        var firstRefusal: UInt64?
        while firstRefusal == nil && originSeq < 3000 {
            originSeq += 1
            guard let taken = send(originSeq) else {
                Issue.record("batch \(originSeq) neither relayed nor refused; log:\n\(daemon.log)")
                return
            }
            if !taken { firstRefusal = originSeq }
        }
        print("DaemonDiskFullTests: \(accepted.count) accepted, first refusal \(firstRefusal ?? 0), \(monotonicMicroseconds() - started) us")
        let fullLine = daemon.waitForLine(containing: "msg=\"room log write failed: disk full; live relay goes on")
        #expect(fullLine != nil, "\(daemon.log)")
        #expect(firstRefusal != nil, "no batch refused after \(originSeq)")
        #expect(daemon.log.contains("msg=\"room log backlog full: new batches are refused until it drains\""))
        // While the disk is full, further batches are refused, never relayed.
        for _ in 0..<3 {
            originSeq += 1
            #expect(send(originSeq) == false)
        }
        _ = teacherPoll(200_000)
        #expect(maxAcked < UInt64(accepted.count), "acked \(maxAcked) of \(accepted.count) while the disk is full")
        let during = try fetchMetrics(port: metricsPort)
        #expect((metricValue(during, "inkwire_store_failures_total{kind=\"disk_full\"}") ?? 0) >= 1, "\(during)")
        #expect(metricValue(during, "inkwire_store_failing") == 1)
        #expect(metricValue(during, "inkwire_refused_batches_total{reason=\"storage_unavailable\"}") == Double(refused.count))

        // Space returns: the backlog and the held batch are written, every accepted batch is acknowledged.
        #expect(system("/bin/mount -o remount,size=16m '\(dataDir)'") == 0)
        let deadline = monotonicMicroseconds() + 20_000_000
        while maxAcked < UInt64(accepted.count) && monotonicMicroseconds() < deadline { _ = teacherPoll(50_000) }
        #expect(maxAcked == UInt64(accepted.count), "\(daemon.log)")
        #expect(daemon.waitForLine(containing: "msg=\"room log writes again") != nil)
        // A refused batch sent again is taken now.
        let again = try #require(refused.first)
        #expect(send(again) == true)
        while maxAcked < UInt64(accepted.count) && monotonicMicroseconds() < deadline + 5_000_000 { _ = teacherPoll(50_000) }
        #expect(maxAcked == UInt64(accepted.count))
        let after = try fetchMetrics(port: metricsPort)
        #expect(metricValue(after, "inkwire_store_failing") == 0)
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)

        // Nothing accepted is lost: the restarted daemon holds all of it, the board the viewer folded.
        let restarted = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--data-dir", dataDir], dataDir: scratch, tag: "diskfull")
        let again2 = try restarted.ready()
        #expect(restarted.log.contains("msg=\"room reopened\" room=lesson batches=\(accepted.count) room_seq=\(accepted.count)"), "\(restarted.log)")
        let late = try NativeTestClient(.tcp, port: try #require(DaemonProcess.port(again2["tcp"])))
        #expect(DaemonNativeTests.joined(late, user: "late", role: .viewer) != nil)
        var done: ServerMessage?
        while done == nil, let message = late.next(limitMicroseconds: 10_000_000, where: { m in
            if case .syncChunk = m { true } else if case .syncDone = m { true } else { false }
        }) {
            if case .syncChunk(let syncID, let index, _) = message { late.send(.syncAck(syncID: syncID, chunk: index)) } else { done = message }
        }
        guard case .syncDone(_, let roomSeq, let digest)? = done else {
            Issue.record("no syncDone: \(String(describing: done)) accepted \(accepted.count) refused \(refused.count); log:\n\(restarted.log)")
            return
        }
        #expect(roomSeq == UInt64(accepted.count))
        #expect(digest == board.digest)
        restarted.signal(SIGTERM)
        #expect(restarted.waitExit() == 0)
    }
}
