import CSQLite
import Foundation
import Testing
@testable import InkStore

@Suite struct SQLiteStoreTests {
    @Test(arguments: Durability.allCases)
    func everyDurabilityModeCommitsAndWakesTheCaller(durability: Durability) throws {
        let harness = StoreHarness(.sqlite)
        let wakeups = WakeupCounter()
        var options = SQLiteRoomLogStore.Options()
        options.durability = durability
        options.onDurable = { wakeups.add() }
        var store: SQLiteRoomLogStore? = try SQLiteRoomLogStore(path: harness.path, options: options)
        for seq in UInt64(1)...50 { _ = try store?.append(batch("r", originSeq: seq)) }
        try store?.flush()
        #expect(store?.pollDurable() == [DurableMark(room: "r", roomSeq: 50)])
        #expect(wakeups.count >= 1)
        if durability == .always { #expect(store?.usage.commits ?? 0 >= 50) }
        store = nil
        let db = try SQLiteConnection(path: harness.path)
        #expect(try db.scalar("PRAGMA user_version") == Int64(SQLiteSchema.currentVersion))
        #expect(try db.scalar("SELECT count(*) FROM batches") == 50)
    }

    @Test func walModeAndFullSynchronousAreInForce() throws {
        let harness = StoreHarness(.sqlite)
        let store = try harness.open()
        _ = try store.append(batch("r", originSeq: 1))
        try store.flush()
        #expect(FileManager.default.fileExists(atPath: harness.path + "-wal"))
        let db = try SQLiteConnection(path: harness.path)
        #expect(try db.scalar("PRAGMA user_version") == Int64(SQLiteSchema.currentVersion))
        #expect(try db.scalar("PRAGMA application_id") == Int64(SQLiteSchema.applicationID))
        let mode = try db.prepare("PRAGMA journal_mode")
        #expect(try mode.step() && mode.string(0) == "wal")
    }

    @Test func aDatabaseFromANewerReleaseIsRefused() throws {
        let harness = StoreHarness(.sqlite)
        try harness.open().close()
        harness.store?.close()
        do {
            let db = try SQLiteConnection(path: harness.path)
            try db.exec("PRAGMA user_version = 99")
        }
        #expect(throws: StoreError.schemaTooNew(found: 99, supported: SQLiteSchema.currentVersion)) {
            _ = try SQLiteRoomLogStore(path: harness.path)
        }
    }

    @Test func aDamagedPayloadIsReportedNotServed() throws {
        let harness = StoreHarness(.sqlite)
        var store = try harness.open()
        for seq in UInt64(1)...3 { _ = try store.append(batch("r", originSeq: seq)) }
        try store.flush()
        do {
            let db = try SQLiteConnection(path: harness.path)
            try db.exec("UPDATE batches SET payload = x'00' WHERE room_seq = 2")
        }
        store = try harness.open()
        #expect(throws: StoreError.corruptRecord(room: "r", roomSeq: 2)) { try readAll(store, "r") }
        #expect(try store.readTail(room: "r", after: 2, maxRecords: 5, maxBytes: 1000).records.map(\.roomSeq) == [3])
    }

    @Test func anUnopenableDirectoryGivesTheSQLiteError() throws {
        #expect(throws: StoreError.self) { _ = try SQLiteRoomLogStore(path: "/nonexistent-inkstore/dir/rooms.sqlite") }
        do {
            _ = try SQLiteRoomLogStore(path: "/nonexistent-inkstore/dir/rooms.sqlite")
        } catch {
            guard case .storage(let code, _, _) = error else { Issue.record("unexpected \(error)"); return }
            #expect(code & 0xff == SQLITE_CANTOPEN)
        }
    }
}

/// Counts writer-thread wake-ups.
final class WakeupCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add() { lock.lock(); value += 1; lock.unlock() }
    var count: Int { lock.lock(); defer { lock.unlock() }; return value }
}
