import InkClient
import InkCodec
import InkProtocol
import Testing

/// The board as bytes: its snapshot batches in the binary codec, each self-contained.
private func boardBytes(_ board: Board) throws -> [[UInt8]] {
    try board.snapshotBatches(maxCommandsPerBatch: 2048).map { batch in
        var state = BinaryCodecState()
        return try BinaryBatchCodec.encode(batch, state: &state, selfContained: true)
    }
}

/// A viewer that watched the whole lesson live and one that joined after it (snapshot sync)
/// hold the same board, byte for byte in the binary codec, and so does the relay.
@Test func lateJoinerHoldsTheEarlyJoinersBoardByteForByte() throws {
    let h = ClientRelayHarness()
    let teacher = h.join(user: "teacher", role: .teacher)
    let early = h.join(user: "early", role: .viewer)
    let isJoined = { (c: ClientRelayHarness.Client) in c.session.isJoined && !c.session.isSyncing }
    #expect(h.run { isJoined(teacher) && isJoined(early) })
    var last: UInt64 = 0
    for batch in Batch.cut(syntheticLesson(strokes: 30, points: 40), author: AuthorID(0)) {
        last = try teacher.session.send(batch.commands, now: h.now)
    }
    let ackedAll = { teacher.events.contains { if case .acknowledged(let o, _) = $0 { o == last } else { false } } }
    #expect(h.run { ackedAll() && early.session.appliedRoomSeq == h.relay.roomHead("r") })
    let late = h.join(user: "late", role: .viewer)
    let synced = { late.events.contains { if case .syncDone(_, _, let matches) = $0 { matches } else { false } } }
    #expect(h.run { synced() })
    let relayBoard = try #require(h.relay.board("r"))
    #expect(try boardBytes(late.session.board) == boardBytes(early.session.board))
    #expect(try boardBytes(late.session.board) == boardBytes(relayBoard))
    #expect(try !boardBytes(relayBoard).isEmpty)
}
