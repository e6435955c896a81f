import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// Undone strokes that a new stroke of their author made unredoable are gone from the board,
/// so the compacted room (`snapshotRecord`) drops them: same board, byte for byte, fewer bytes.
@Suite struct RoomCompactionTests {
    /// Every batch of `board.snapshotBatches()`, each self-contained in the binary codec.
    static func encodedBoard(_ board: Board) throws -> [[UInt8]] {
        try board.snapshotBatches().map { batch in
            var state = BinaryCodecState()
            return try BinaryBatchCodec.encode(batch, state: &state, selfContained: true)
        }
    }

    static func fold(_ payloads: [(AuthorID, [UInt8])]) throws -> Board {
        var board = Board()
        for (author, payload) in payloads {
            var fresh = BinaryCodecState()
            board.apply(Batch(author: author, commands: try BinaryBatchCodec.decode(payload, state: &fresh).commands))
        }
        return board
    }

    @Test func unredoableUndoneStrokesLeaveTheCompactedBoardWhichIsIdenticalAndSmaller() throws {
        let h = Harness()
        var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
        var p = Device(h.open(2), origin: 2, user: "p", role: .presenter)
        var early = Device(h.open(3), origin: 3, user: "early", role: .viewer)
        h.join(&t)
        h.join(&p)
        h.join(&early)
        // The teacher: 14 short strokes, then 6 long ones, undoes the long ones, draws again.
        for i in 0..<20 {
            let (message, _) = t.stroke(points: i < 14 ? 20 : 300, x: Int32(i) * 1000)
            h.deliver(message, from: t.session)
        }
        for s in (15...20).reversed() { h.deliver(t.commands([.undo(StrokeID(UInt32(s)))]), from: t.session) }
        // The presenter's undone stroke stays redoable: it must stay in the compacted board.
        h.deliver(p.stroke(points: 40, x: 7).0, from: p.session)
        h.deliver(p.commands([.undo(StrokeID(1))]), from: p.session)
        #expect(h.relay.garbageSinceSnapshot("r") == RoomGarbage(loggedPoints: 14 * 20 + 6 * 300 + 40, discardedPoints: 0))
        h.deliver(t.stroke(points: 20, x: 99).0, from: t.session)
        #expect(h.relay.garbageSinceSnapshot("r") == RoomGarbage(loggedPoints: 14 * 20 + 6 * 300 + 40 + 20, discardedPoints: 6 * 300))
        h.pumpSync(&early)

        let log = h.appended
        #expect(log.count == 20 + 6 + 2 + 1)
        let uncompacted = try Self.fold(log.map { ($0.author, $0.payload) })
        let record = try #require(h.relay.snapshotRecord(room: "r"))
        #expect(h.relay.garbageSinceSnapshot("r") == RoomGarbage())
        let compacted = try Self.foldSnapshot(record)

        let author = try #require(t.author)
        #expect(compacted.digest == uncompacted.digest)
        #expect(compacted.digest == early.board.digest && compacted.digest == h.relay.board("r")!.digest)
        #expect(try Self.encodedBoard(compacted) == Self.encodedBoard(uncompacted))
        for s in 15...20 { #expect(compacted.stroke(StrokeRef(author: author, stroke: StrokeID(UInt32(s)))) == nil) }
        let presenter = try #require(p.author)
        let kept = try #require(compacted.stroke(StrokeRef(author: presenter, stroke: StrokeID(1))))
        #expect(!kept.isVisible && compacted.author(p.author!).redoStack == [StrokeID(1)])
        let logBytes = log.reduce(0) { $0 + $1.payload.count }
        let snapshotBytes = record.encode().count
        #expect(snapshotBytes * 2 < logBytes, "snapshot \(snapshotBytes) bytes, log \(logBytes)")

        // A restart from the compacted room and a late joiner both hold the same board.
        let restored = Relay()
        try restored.restore(snapshot: RoomSnapshotRecord.decode(record.encode()))
        #expect(try Self.encodedBoard(restored.board("r")!) == Self.encodedBoard(uncompacted))
        var late = Device(h.open(4), origin: 4, user: "late", role: .viewer)
        h.join(&late)
        #expect(try Self.encodedBoard(late.board) == Self.encodedBoard(uncompacted))
    }

    /// Snapshot batches carry their own authors: fold them as `Relay.restore(snapshot:)` does.
    static func foldSnapshot(_ record: RoomSnapshotRecord) throws -> Board {
        var board = Board()
        for payload in record.batches {
            var fresh = BinaryCodecState()
            board.apply(try BinaryBatchCodec.decode(payload, state: &fresh))
        }
        return board
    }
}
