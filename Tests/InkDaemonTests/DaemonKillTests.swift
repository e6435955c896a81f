import Glibc
import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

/// `kill -9` of the real daemon while a teacher streams batches, several times at seeded
/// moments: every batch acknowledged before a kill is in the room after the restart, and the
/// batches sent again (same origin and numbers) are appended once.
@Suite struct DaemonKillTests {
    static func stroke(_ i: Int) -> [Command] {
        let s = StrokeID(UInt32(i))
        return [.point(StrokePoint(stroke: s, phase: .start, x: Int32(i) * 10, y: 5)),
                .point(StrokePoint(stroke: s, phase: .move, x: Int32(i) * 10 + 3, y: 9)),
                .point(StrokePoint(stroke: s, phase: .end, x: Int32(i) * 10 + 7, y: 11))]
    }

    static func isAck(_ m: ServerMessage) -> Bool { if case .batchAck = m { true } else { false } }

    @Test(arguments: [UInt64(1), 2])
    func killNineUnderLoadLosesNothingAcknowledged(seed: UInt64) throws {
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        func random(_ n: UInt64) -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (state >> 33) % n
        }
        let origin: UInt64 = 0x5EED_0000 + seed
        let kills = 3
        let total = 1200
        var ackedSeq: UInt64 = 0
        var ackedRoomSeq: UInt64 = 0
        var dataDir: String?
        var daemons: [DaemonProcess] = []
        defer { withExtendedLifetime(daemons) {} }
        for round in 0...kills {
            let (daemon, ports) = try DaemonNativeTests.start("kill9", extra: dataDir.map { ["--data-dir", $0] } ?? [])
            daemons.append(daemon)
            dataDir = dataDir ?? daemon.dataDir + "/data"
            let device = try NativeTestClient(.tcp, port: ports.tcp)
            device.origin = origin
            device.join(room: "lesson", user: "pen", role: .teacher)
            guard case .joinAccepted(let author, _, let head, _)? = device.next(where: { if case .joinAccepted = $0 { true } else { false } }) else {
                Issue.record("seed \(seed) round \(round): no join; log:\n\(daemon.log)")
                return
            }
            #expect(head >= ackedRoomSeq, "seed \(seed): kill \(round) lost acknowledged batches (head \(head), acknowledged \(ackedRoomSeq))")
            let last = round == kills ? total : min(total, Int(ackedSeq) + 150 + Int(random(150)))
            if Int(ackedSeq) < last {
                for i in Int(ackedSeq) + 1...last { device.sendBatch(Self.stroke(i), originSeq: UInt64(i), author: author) }
            }
            if round == kills {
                let final = device.next(limitMicroseconds: 20_000_000, where: { if case .batchAck(let o, _) = $0 { o == UInt64(total) } else { false } })
                // Every batch once: the room holds exactly `total`, none lost, none twice.
                #expect(final == .batchAck(originSeq: UInt64(total), roomSeq: UInt64(total)), "seed \(seed)")
                return
            }
            // Kill once a seeded number of the batches in flight is acknowledged: the rest are
            // sent, maybe stored, maybe not.
            let killAfter = ackedSeq + 20 + random(100)
            let limit = monotonicMicroseconds() + 5_000_000
            while ackedSeq < killAfter, monotonicMicroseconds() < limit {
                guard case .batchAck(let o, let r)? = device.next(limitMicroseconds: 1_000_000, where: Self.isAck) else { break }
                ackedSeq = max(ackedSeq, o)
                ackedRoomSeq = max(ackedRoomSeq, r)
            }
            daemon.signal(SIGKILL)
            #expect(daemon.waitExit() == 128 + SIGKILL)
            // Acknowledgements already on their way count too: the daemon sent them.
            while case .batchAck(let o, let r)? = device.next(limitMicroseconds: 50_000, where: Self.isAck) {
                ackedSeq = max(ackedSeq, o)
                ackedRoomSeq = max(ackedRoomSeq, r)
            }
        }
    }
}
