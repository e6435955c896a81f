import Testing
@testable import InkStore

/// The same behaviour, checked against the memory store and the SQLite store.
@Suite struct RoomLogBehaviourTests {
    @Test(arguments: StoreKind.allCases)
    func appendsGetDenseSeqsAndSurviveReopen(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        for seq in UInt64(1)...10 {
            for room in ["b", "a", "c"] {
                #expect(try store.append(batch(room, originSeq: seq, at: 1000 + seq)) == .appended(roomSeq: seq))
            }
        }
        try store.flush()
        #expect(store.pollDurable() == [DurableMark(room: "a", roomSeq: 10), DurableMark(room: "b", roomSeq: 10), DurableMark(room: "c", roomSeq: 10)])
        #expect(store.pollDurable() == [])
        store = try harness.open()
        #expect(store.rooms().map(\.name) == ["a", "b", "c"])
        let info = try #require(store.room("b"))
        #expect(info == RoomInfo(name: "b", createdAtMs: 1001, lastActivityMs: 1010, retention: .board, lastRoomSeq: 10,
                                 durableRoomSeq: 10, firstRoomSeq: 1, snapshotUptoRoomSeq: 0, recordCount: 10,
                                 historyBytes: (1...10).reduce(0) { $0 + testPayload(room: "b", seq: $1).count }))
        let records = try readAll(store, "b")
        #expect(records.map(\.roomSeq) == Array(1...10))
        #expect(records[3] == BatchRecord(roomSeq: 4, origin: 7, originSeq: 4, author: "member-7", receivedAtMs: 1004,
                                           payload: testPayload(room: "b", seq: 4)))
        #expect(try store.append(batch("b", originSeq: 11)) == .appended(roomSeq: 11))
    }

    @Test(arguments: StoreKind.allCases)
    func duplicatesAreRecognisedByOriginAndOriginSeq(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        #expect(try store.append(batch("r", origin: 1, originSeq: 1)) == .appended(roomSeq: 1))
        #expect(try store.append(batch("r", origin: 2, originSeq: 1)) == .appended(roomSeq: 2))
        #expect(try store.append(batch("r", origin: 1, originSeq: 1)) == .duplicate(roomSeq: 1))
        try store.flush()
        #expect(try store.append(batch("r", origin: 2, originSeq: 1)) == .duplicate(roomSeq: 2))
        store = try harness.open()
        #expect(try store.append(batch("r", origin: 1, originSeq: 1)) == .duplicate(roomSeq: 1))
        #expect(try store.append(batch("r", origin: 1, originSeq: 2)) == .appended(roomSeq: 3))
        #expect(try store.append(batch("other", origin: 1, originSeq: 1)) == .appended(roomSeq: 1))
        #expect(try store.find(room: "r", origin: 2, originSeq: 1) == 2)
        #expect(try store.find(room: "r", origin: 2, originSeq: 9) == nil)
        #expect(store.usage.duplicates == 1)
    }

    @Test(arguments: StoreKind.allCases)
    func duplicatesAreRecognisedBeyondTheTrackedOrigins(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        harness.limits.maxTrackedOriginsPerRoom = 1
        var store = try harness.open()
        for origin in UInt64(1)...3 { _ = try store.append(batch("r", origin: origin, originSeq: 10)) }
        #expect(try store.append(batch("r", origin: 3, originSeq: 10)) == .duplicate(roomSeq: 3))
        try store.flush()
        store = try harness.open()
        for origin in UInt64(1)...3 { #expect(try store.append(batch("r", origin: origin, originSeq: 10)) == .duplicate(roomSeq: origin)) }
        #expect(try store.append(batch("r", origin: 2, originSeq: 9)) == .appended(roomSeq: 4))
        #expect(try store.append(batch("r", origin: 4, originSeq: 1)) == .appended(roomSeq: 5))
    }

    @Test(arguments: StoreKind.allCases)
    func anExpectedRoomSeqMustBeTheNextOne(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        var first = batch("r", originSeq: 1)
        first.expectedRoomSeq = 1
        #expect(try store.append(first) == .appended(roomSeq: 1))
        var skipping = batch("r", originSeq: 2)
        skipping.expectedRoomSeq = 3
        #expect(throws: StoreError.roomSeqMismatch(room: "r", next: 2, expected: 3)) { try store.append(skipping) }
        var fresh = batch("new", originSeq: 1)
        fresh.expectedRoomSeq = 2
        #expect(throws: StoreError.roomSeqMismatch(room: "new", next: 1, expected: 2)) { try store.append(fresh) }
        #expect(store.room("new") == nil)
        try store.flush()
        store = try harness.open()
        skipping.expectedRoomSeq = 2
        #expect(try store.append(skipping) == .appended(roomSeq: 2))
        #expect(try store.append(first) == .duplicate(roomSeq: 1))  // a duplicate is recognised first
    }

    @Test(arguments: StoreKind.allCases)
    func tailPagesAreBoundedAndIncludeWhatIsNotYetDurable(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        let store = try harness.open()
        for seq in UInt64(1)...40 { _ = try store.append(batch("r", originSeq: seq, payload: [UInt8](repeating: UInt8(seq), count: 10))) }
        try store.flush()
        for seq in UInt64(41)...50 { _ = try store.append(batch("r", originSeq: seq, payload: [UInt8](repeating: UInt8(seq), count: 10))) }

        let first = try store.readTail(room: "r", after: 0, maxRecords: 30, maxBytes: 10_000)
        #expect(first.records.map(\.roomSeq) == Array(1...30) && first.nextAfter == 30 && !first.reachedEnd)
        let second = try store.readTail(room: "r", after: 30, maxRecords: 30, maxBytes: 10_000)
        #expect(second.records.map(\.roomSeq) == Array(31...50) && second.nextAfter == 50 && second.reachedEnd)
        #expect(second.records.last?.payload == [UInt8](repeating: 50, count: 10))
        let byBytes = try store.readTail(room: "r", after: 36, maxRecords: 100, maxBytes: 55)
        #expect(byBytes.records.map(\.roomSeq) == [37, 38, 39, 40, 41])
        let atLeastOne = try store.readTail(room: "r", after: 3, maxRecords: 100, maxBytes: 1)
        #expect(atLeastOne.records.map(\.roomSeq) == [4])
        let end = try store.readTail(room: "r", after: 50, maxRecords: 10, maxBytes: 100)
        #expect(end == TailPage(records: [], nextAfter: 50, reachedEnd: true))
        #expect(throws: StoreError.roomNotFound("nope")) { try store.readTail(room: "nope", after: 0, maxRecords: 1, maxBytes: 1) }
    }

    @Test(arguments: StoreKind.allCases)
    func boardRetentionCompactsWhatTheSnapshotCovers(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        for seq in UInt64(1)...20 { _ = try store.append(batch("r", originSeq: seq, payload: [UInt8](repeating: 1, count: 10))) }
        try store.flush()
        let snapshot = RoomSnapshot(uptoRoomSeq: 12, payload: [9, 9, 9], digest: [0xAB, 0xCD], createdAtMs: 5000)
        try store.writeSnapshot(room: "r", snapshot)
        #expect(try store.latestSnapshot(room: "r") == snapshot)
        let expected = RoomInfo(name: "r", createdAtMs: 1000, lastActivityMs: 1000, retention: .board, lastRoomSeq: 20, durableRoomSeq: 20,
                                firstRoomSeq: 13, snapshotUptoRoomSeq: 12, recordCount: 8, historyBytes: 80)
        #expect(store.room("r") == expected)
        #expect(throws: StoreError.historyCompacted(room: "r", firstAvailable: 13)) {
            try store.readTail(room: "r", after: 5, maxRecords: 100, maxBytes: 1000)
        }
        #expect(try readAll(store, "r", after: 12).map(\.roomSeq) == Array(13...20))
        try store.flush()
        store = try harness.open()
        #expect(store.room("r") == expected)
        #expect(try store.latestSnapshot(room: "r") == snapshot)
        #expect(try readAll(store, "r", after: 12).map(\.roomSeq) == Array(13...20))
        // A compacted batch arriving again is still recognised; its position is gone (0).
        #expect(try store.append(batch("r", originSeq: 3)) == .duplicate(roomSeq: 0))
        #expect(try store.append(batch("r", originSeq: 15)) == .duplicate(roomSeq: 15))
        #expect(try store.append(batch("r", originSeq: 21)) == .appended(roomSeq: 21))
    }

    @Test(arguments: StoreKind.allCases)
    func snapshotOverPendingBatchesCompactsThemToo(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        for seq in UInt64(1)...5 { _ = try store.append(batch("r", originSeq: seq, payload: [1, 2])) }
        try store.flush()
        for seq in UInt64(6)...10 { _ = try store.append(batch("r", originSeq: seq, payload: [1, 2])) }
        try store.writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: 4, payload: [1], digest: [], createdAtMs: 1))
        try store.writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: 8, payload: [2], digest: [], createdAtMs: 2))
        #expect(store.room("r")?.recordCount == 2 && store.room("r")?.historyBytes == 4)
        try store.flush()
        store = try harness.open()
        #expect(store.room("r")?.recordCount == 2 && store.room("r")?.historyBytes == 4 && store.room("r")?.firstRoomSeq == 9)
        #expect(try store.latestSnapshot(room: "r")?.payload == [2])
        #expect(throws: StoreError.snapshotOutOfRange(room: "r", upto: 7, last: 10, previous: 8)) {
            try store.writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: 7, payload: [], digest: [], createdAtMs: 3))
        }
        #expect(throws: StoreError.snapshotOutOfRange(room: "r", upto: 11, last: 10, previous: 8)) {
            try store.writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: 11, payload: [], digest: [], createdAtMs: 3))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func fullRetentionKeepsEveryBatch(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        harness.retention = .full
        var store = try harness.open()
        for seq in UInt64(1)...20 { _ = try store.append(batch("r", originSeq: seq)) }
        try store.writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: 12, payload: [7], digest: [1], createdAtMs: 1))
        try store.flush()
        store = try harness.open()
        let info = try #require(store.room("r"))
        #expect(info.retention == .full && info.firstRoomSeq == 1 && info.recordCount == 20 && info.snapshotUptoRoomSeq == 12)
        #expect(try readAll(store, "r").map(\.payload) == (1...20).map { testPayload(room: "r", seq: $0) })
        #expect(try store.latestSnapshot(room: "r")?.payload == [7])
    }

    @Test(arguments: StoreKind.allCases)
    func historyLimitChangesWhileOpen(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        harness.limits.maxRoomHistoryBytes = 1000
        let store = try #require(try harness.open() as? LogFrontedStore)
        for seq in UInt64(1)...3 { _ = try store.append(batch("r", originSeq: seq, payload: [UInt8](repeating: 0, count: 100))) }
        // Lowered below what the room keeps: it keeps it and takes nothing more.
        store.applyLiveLimits(maxRoomHistoryBytes: 250, idleRoomExpiryMs: 0)
        #expect(throws: StoreError.roomHistoryFull(room: "r", bytes: 400, limit: 250)) {
            try store.append(batch("r", originSeq: 4, payload: [UInt8](repeating: 0, count: 100)))
        }
        #expect(store.room("r")?.historyBytes == 300)
        // Raised again: the next batch goes in.
        store.applyLiveLimits(maxRoomHistoryBytes: 400, idleRoomExpiryMs: 0)
        #expect(try store.append(batch("r", originSeq: 4, payload: [UInt8](repeating: 0, count: 100))) == .appended(roomSeq: 4))
        // Idle expiry 0 means never, whatever the clock says.
        #expect(try store.expireIdleRooms(nowMs: .max) == [])
    }

    @Test(arguments: StoreKind.allCases)
    func limitsGiveTypedErrors(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        harness.limits.maxPayloadBytes = 100
        harness.limits.maxRoomHistoryBytes = 250
        harness.limits.maxRooms = 2
        let store = try harness.open()
        #expect(throws: StoreError.payloadTooLarge(bytes: 101, limit: 100)) {
            try store.append(batch("r", originSeq: 1, payload: [UInt8](repeating: 0, count: 101)))
        }
        #expect(throws: StoreError.invalidRoomName("")) { try store.append(batch("", originSeq: 1)) }
        let longName = String(repeating: "x", count: StoreLimits.maxRoomNameBytes + 1)
        #expect(throws: StoreError.invalidRoomName(longName)) { try store.append(batch(longName, originSeq: 1)) }
        var longAuthor = batch("r", originSeq: 1)
        longAuthor.author = String(repeating: "a", count: StoreLimits.maxAuthorBytes + 1)
        #expect(throws: StoreError.authorTooLong(bytes: StoreLimits.maxAuthorBytes + 1)) { try store.append(longAuthor) }
        #expect(throws: StoreError.originSeqTooLarge(UInt64.max)) { try store.append(batch("r", originSeq: .max)) }
        for seq in UInt64(1)...2 { _ = try store.append(batch("r", originSeq: seq, payload: [UInt8](repeating: 0, count: 100))) }
        #expect(throws: StoreError.roomHistoryFull(room: "r", bytes: 300, limit: 250)) {
            try store.append(batch("r", originSeq: 3, payload: [UInt8](repeating: 0, count: 100)))
        }
        // Compaction (board retention) frees history for new batches.
        try store.writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: 2, payload: [], digest: [], createdAtMs: 1))
        #expect(try store.append(batch("r", originSeq: 3, payload: [UInt8](repeating: 0, count: 100))) == .appended(roomSeq: 3))
        _ = try store.append(batch("s", originSeq: 1))
        #expect(throws: StoreError.tooManyRooms(limit: 2)) { try store.append(batch("t", originSeq: 1)) }
        #expect(throws: StoreError.roomExists("s")) { try store.createRoom("s", retention: .full, nowMs: 1) }
        #expect(throws: StoreError.snapshotTooLarge(bytes: 65, limit: 64)) {
            harness.limits.maxSnapshotBytes = 64
            try harness.open().writeSnapshot(room: "r", RoomSnapshot(uptoRoomSeq: 3, payload: [UInt8](repeating: 0, count: 65), digest: [], createdAtMs: 1))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func idleRoomsExpire(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        harness.limits.idleRoomExpiryMs = 1000
        var store = try harness.open()
        _ = try store.append(batch("a", originSeq: 1, at: 5000))
        _ = try store.append(batch("b", originSeq: 1, at: 9000))
        _ = try store.createRoom("c", retention: .full, nowMs: 8000)
        try store.flush()
        #expect(try store.expireIdleRooms(nowMs: 9500) == ["a", "c"])
        #expect(store.usage.expiredRooms == 2)
        try store.flush()
        store = try harness.open()
        #expect(store.rooms().map(\.name) == ["b"])
        // The name is free again, starting from roomSeq 1.
        #expect(try store.append(batch("a", originSeq: 1, at: 9600)) == .appended(roomSeq: 1))
        #expect(try store.expireIdleRooms(nowMs: 9700) == [])
    }

    @Test(arguments: StoreKind.allCases)
    func deletedRoomNameCanBeReusedBeforeTheDeletionCommits(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        _ = try store.append(batch("a", originSeq: 1))
        try store.deleteRoom("a")
        #expect(try store.append(batch("a", originSeq: 1, payload: [42])) == .appended(roomSeq: 1))
        try store.flush()
        store = try harness.open()
        #expect(try readAll(store, "a").map(\.payload) == [[42]])
    }

    @Test(arguments: StoreKind.allCases)
    func usageCountsRoomsRecordsAndCommits(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        let store = try harness.open()
        for seq in UInt64(1)...4 { _ = try store.append(batch("r", originSeq: seq, payload: [1, 2, 3])) }
        try store.flush()
        let usage = store.usage
        #expect(usage.rooms == 1 && usage.records == 4 && usage.historyBytes == 12 && usage.appends == 4)
        #expect(usage.pendingOps == 0 && usage.pendingBytes == 0 && usage.commits >= 1 && usage.failedCommits == 0)
        store.close()
        #expect(throws: StoreError.closed) { try store.append(batch("r", originSeq: 9)) }
    }
}
