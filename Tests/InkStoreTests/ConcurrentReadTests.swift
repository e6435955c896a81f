import Testing
@testable import InkStore

/// The loop reads and compacts while the writer thread commits: every read must see a dense,
/// intact log and the room's counts must match it, whichever batches happen to be committed.
@Suite struct ConcurrentReadTests {
    @Test(arguments: StoreKind.allCases)
    func readsAndCompactionStayConsistentWhileCommitsLand(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        var rng = TestRandom(seed: 77)
        var sent: [UInt64: [UInt8]] = [:]
        for step in UInt64(1)...2000 {
            let payload = [UInt8](repeating: UInt8(truncatingIfNeeded: step), count: Int(rng.next() % 300))
            sent[step] = payload
            #expect(try store.append(batch("r", originSeq: step, payload: payload)) == .appended(roomSeq: step))
            if step % 7 == 0 { try checkConsistent(store, sent, step: step) }
            if step % 13 == 0 { _ = store.pollDurable() }
            if step % 250 == 0 {
                try store.writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: step - UInt64(rng.next() % 100), payload: [1], digest: [], createdAtMs: step))
                try checkConsistent(store, sent, step: step)
            }
        }
        try store.flush()
        let before = store.room("r")
        store = try harness.open()
        #expect(store.room("r") == before)
        try checkConsistent(store, sent, step: 2000)
    }

    private func checkConsistent(_ store: RoomLogStore, _ sent: [UInt64: [UInt8]], step: UInt64) throws {
        let info = try #require(store.room("r"))
        let records = try readAll(store, "r", after: info.firstRoomSeq - 1, pageRecords: 97)
        #expect(records.map(\.roomSeq) == Array(info.firstRoomSeq...info.lastRoomSeq), "step \(step)")
        #expect(records.count == info.recordCount, "step \(step)")
        #expect(records.reduce(0) { $0 + $1.payload.count } == info.historyBytes, "step \(step)")
        for record in records where record.payload != sent[record.roomSeq] {
            Issue.record("step \(step): record \(record.roomSeq) differs")
            return
        }
    }
}
