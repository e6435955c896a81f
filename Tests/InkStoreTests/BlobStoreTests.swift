import Testing
@testable import InkStore

private func blob(_ seed: UInt64, size: Int) -> StoredBlob {
    StoredBlob(hash: testPayload(room: "hash", seq: seed, length: 32), bytes: testPayload(room: "blob", seq: seed, length: size), createdAtMs: 5)
}

/// Blobs (background images) are stored once per room by hash, read back durable or not,
/// survive a reopen, count against the room's quota, and go with their room.
@Suite struct BlobStoreTests {
    @Test(arguments: StoreKind.allCases)
    func blobsAreStoredOnceAndSurviveReopen(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        var store = try harness.open()
        let a = blob(1, size: 70_000)
        #expect(try store.putBlob(room: "r", a) == true)
        #expect(try store.putBlob(room: "r", a) == false, "the same hash again: nothing written")
        #expect(try store.readBlob(room: "r", hash: a.hash) == a.bytes, "readable before it is durable")
        #expect(store.hasBlob(room: "r", hash: a.hash))
        #expect(!store.hasBlob(room: "other", hash: a.hash), "per room")
        #expect(try store.putBlob(room: "other", a) == true)
        #expect(store.room("r")?.blobBytes == 70_000)
        try store.flush()
        store = try harness.open()
        #expect(try store.readBlob(room: "r", hash: a.hash) == a.bytes)
        #expect(try store.readBlob(room: "r", hash: blob(2, size: 1).hash) == nil)
        #expect(store.room("r")?.blobCount == 1 && store.room("r")?.blobBytes == 70_000)
        #expect(try store.putBlob(room: "r", a) == false)
        try store.deleteRoom("r")
        try store.flush()
        store = try harness.open()
        #expect(!store.hasBlob(room: "r", hash: a.hash))
        #expect(store.hasBlob(room: "other", hash: a.hash))
    }

    @Test(arguments: StoreKind.allCases)
    func blobBoundsAreTypedErrors(kind: StoreKind) throws {
        let harness = StoreHarness(kind)
        harness.limits.maxBlobBytes = 1000
        harness.limits.maxRoomBlobBytes = 2500
        let store = try harness.open()
        #expect(throws: StoreError.blobTooLarge(bytes: 1001, limit: 1000)) { try store.putBlob(room: "r", blob(1, size: 1001)) }
        #expect(throws: StoreError.blobTooLarge(bytes: 0, limit: 1000)) { try store.putBlob(room: "r", blob(1, size: 0)) }
        var bad = blob(1, size: 10)
        bad.hash = []
        #expect(throws: StoreError.invalidBlobHash(bytes: 0)) { try store.putBlob(room: "r", bad) }
        #expect(try store.putBlob(room: "r", blob(2, size: 1000)))
        #expect(try store.putBlob(room: "r", blob(3, size: 1000)))
        #expect(throws: StoreError.roomBlobQuotaFull(room: "r", bytes: 3000, limit: 2500)) { try store.putBlob(room: "r", blob(4, size: 1000)) }
        #expect(try store.putBlob(room: "r", blob(5, size: 500)), "what fits the quota still goes")
        #expect(!store.hasBlob(room: "r", hash: blob(4, size: 1000).hash))
    }

    /// Writes are ordered: a batch appended after its blob is durable only with the blob, so a
    /// crash never leaves a stored background command without its image.
    @Test func aBatchAfterItsBlobIsNeverDurableWithoutIt() throws {
        let disk = MemoryRoomLogStore.Disk()
        var store = MemoryRoomLogStore(disk: disk, holdDurability: true)
        let a = blob(7, size: 5000)
        #expect(try store.putBlob(room: "r", a))
        #expect(try store.append(NewBatch(room: "r", origin: 1, originSeq: 1, author: "t", receivedAtMs: 9, payload: [1, 2, 3])) == .appended(roomSeq: 1))
        #expect(store.pollDurable().isEmpty)
        // A crash now: reopen the disk without committing what was held.
        store = MemoryRoomLogStore(disk: disk)
        #expect(store.room("r") == nil && !store.hasBlob(room: "r", hash: a.hash))
        #expect(try store.putBlob(room: "r", a))
        _ = try store.append(NewBatch(room: "r", origin: 1, originSeq: 1, author: "t", receivedAtMs: 9, payload: [1, 2, 3]))
        try store.flush()
        #expect(store.pollDurable() == [DurableMark(room: "r", roomSeq: 1)])
        store = MemoryRoomLogStore(disk: disk)
        #expect(try store.readBlob(room: "r", hash: a.hash) == a.bytes)
    }
}
