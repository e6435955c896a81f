import CSQLite
import Foundation
import Testing
@testable import InkStore

/// Schema migrations take a copy first; backups and restores are consistent and checked.
@Suite struct MigrationBackupTests {
    /// Turns a current room log into what release 0.1.0 wrote: schema 1, no application id.
    static func makeSchema1(_ path: String) throws {
        let db = try SQLiteConnection(path: path)
        try db.exec("DROP TABLE schema_history; DROP TABLE blobs; PRAGMA application_id = 0; PRAGMA user_version = 1;")
    }

    static func files(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    static func write(_ harness: StoreHarness, rooms: [String], batches: UInt64) throws {
        let store = try harness.open()
        for room in rooms { for seq in 1...batches { _ = try store.append(batch(room, originSeq: seq)) } }
        try store.flush()
        store.close()
    }

    @Test func aSchema1LogIsCopiedThenMigratedOnce() throws {
        let harness = StoreHarness(.sqlite)
        try Self.write(harness, rooms: ["maths", "art"], batches: 40)
        try Self.makeSchema1(harness.path)
        var options = SQLiteRoomLogStore.Options()
        options.release = "inkwired test"
        let store = try SQLiteRoomLogStore(path: harness.path, options: options)
        let migration = try #require(store.migration)
        #expect(migration.fromVersion == 1 && migration.toVersion == SQLiteSchema.currentVersion)
        #expect(migration.backupPath.hasPrefix(harness.directory + "/backups/rooms-schema1-"))
        // Every room is there, read back intact after the migration.
        #expect(store.rooms().map(\.name) == ["art", "maths"])
        for room in ["art", "maths"] {
            #expect(try readAll(store, room).map(\.payload) == (UInt64(1)...40).map { testPayload(room: room, seq: $0) })
        }
        store.close()
        // The copy is the schema-1 file as it was: a self-contained database that the old release reads.
        let copy = try SQLiteConnection(path: migration.backupPath, readOnly: true)
        #expect(try copy.scalar("PRAGMA user_version") == 1)
        #expect(try copy.scalar("SELECT count(*) FROM batches") == 80)
        #expect(try copy.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'schema_history'") == 0)
        let mode = try copy.prepare("PRAGMA journal_mode")
        #expect(try mode.step() && mode.string(0) == "delete")
        // The migration is recorded once, by the release that applied it.
        let db = try SQLiteConnection(path: harness.path, readOnly: true)
        let row = try db.prepare("SELECT version, applied_by FROM schema_history")
        // The migration is recorded once per version, by the release that applied it.
        for version in 2...SQLiteSchema.currentVersion {
            #expect(try row.step() && row.int64(0) == Int64(version) && row.string(1) == "inkwired test")
        }
        #expect(try !row.step())
        row.reset()
        // Opening again migrates nothing and copies nothing.
        let again = try SQLiteRoomLogStore(path: harness.path)
        #expect(again.migration == nil)
        again.close()
        #expect(Self.files(harness.directory + "/backups").count == 1)
    }

    @Test func aNewLogIsNotCopied() throws {
        let harness = StoreHarness(.sqlite)
        let store = try harness.open() as! SQLiteRoomLogStore
        #expect(store.migration == nil)
        #expect(Self.files(harness.directory).filter { $0 == "backups" }.isEmpty)
    }

    @Test func noCopyNoMigration() throws {
        let harness = StoreHarness(.sqlite)
        try Self.write(harness, rooms: ["r"], batches: 5)
        try Self.makeSchema1(harness.path)
        // The backup directory cannot be made (a file is in its way): the log is left at schema 1.
        FileManager.default.createFile(atPath: harness.directory + "/backups", contents: Data())
        #expect(throws: StoreError.self) { _ = try SQLiteRoomLogStore(path: harness.path) }
        let db = try SQLiteConnection(path: harness.path, readOnly: true)
        #expect(try db.scalar("PRAGMA user_version") == 1)
    }

    @Test func aNewerSchemaIsRefusedAndLeftAlone() throws {
        let harness = StoreHarness(.sqlite)
        try Self.write(harness, rooms: ["r"], batches: 3)
        do { try SQLiteConnection(path: harness.path).exec("PRAGMA user_version = \(SQLiteSchema.currentVersion + 1)") }
        let before = try Data(contentsOf: URL(fileURLWithPath: harness.path))
        #expect(throws: StoreError.schemaTooNew(found: SQLiteSchema.currentVersion + 1, supported: SQLiteSchema.currentVersion)) {
            _ = try SQLiteRoomLogStore(path: harness.path)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: harness.path)) == before)
        #expect(!FileManager.default.fileExists(atPath: harness.directory + "/backups"))
        // A backup of it cannot be restored by this release either.
        let copy = harness.directory + "/newer.sqlite"
        _ = try RoomLogBackup.copy(databaseAt: harness.path, to: copy)
        #expect(throws: StoreError.schemaTooNew(found: SQLiteSchema.currentVersion + 1, supported: SQLiteSchema.currentVersion)) {
            _ = try RoomLogBackup.inspect(copy)
        }
    }

    @Test func aBackupTakenWhileTheWriterCommitsIsAConsistentPrefix() throws {
        let harness = StoreHarness(.sqlite)
        harness.durability = .always
        let store = try harness.open()
        var copies: [(String, RoomLogBackup.Summary)] = []
        for seq in UInt64(1)...400 {
            _ = try store.append(batch("lesson", originSeq: seq))
            if seq % 100 == 50 {
                let path = harness.directory + "/copy-\(seq).sqlite"
                copies.append((path, try RoomLogBackup.copy(databaseAt: harness.path, to: path)))
            }
        }
        try store.flush()
        #expect(copies.count == 4)
        var info = stat()
        #expect(stat(copies[0].0, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(copies.last!.1.batches > 0)
        var previous = 0
        for (path, summary) in copies {
            #expect(try RoomLogBackup.inspect(path) == summary)
            #expect(summary.batches >= previous && summary.batches <= 400)
            previous = summary.batches
            // Dense from 1, each batch intact: a prefix of what was written.
            let copy = try SQLiteRoomLogStore(path: path)
            let records = copy.room("lesson") == nil ? [] : try readAll(copy, "lesson")
            #expect(records.map(\.roomSeq) == (0..<records.count).map { UInt64($0 + 1) })
            #expect(records.map(\.payload) == (0..<records.count).map { testPayload(room: "lesson", seq: UInt64($0 + 1)) })
            copy.close()
        }
        // The destination must not exist; a failed copy leaves nothing behind.
        #expect(throws: StoreError.self) { _ = try RoomLogBackup.copy(databaseAt: harness.path, to: copies[0].0) }
        #expect(throws: StoreError.self) { _ = try RoomLogBackup.copy(databaseAt: harness.path, to: "/nonexistent/dir/x.sqlite") }
        #expect(!FileManager.default.fileExists(atPath: "/nonexistent/dir/x.sqlite.partial"))
    }

    @Test func restoreReplacesTheLogAndKeepsThePreviousOne() throws {
        let harness = StoreHarness(.sqlite)
        try Self.write(harness, rooms: ["maths"], batches: 10)
        let backup = harness.directory + "/maths.sqlite"
        _ = try RoomLogBackup.copy(databaseAt: harness.path, to: backup)
        try Self.write(harness, rooms: ["art"], batches: 3)  // a later change the restore undoes
        let previous = harness.directory + "/before-restore.sqlite"
        let summary = try RoomLogBackup.restore(from: backup, to: harness.path, keepingPreviousAs: previous)
        #expect(summary.rooms == 1 && summary.batches == 10)
        let restored = try harness.open()
        #expect(restored.rooms().map(\.name) == ["maths"])
        restored.close()
        let kept = try SQLiteRoomLogStore(path: previous)
        #expect(kept.rooms().map(\.name) == ["art", "maths"])
        kept.close()
        // Not a room log: refused before anything is touched.
        let other = harness.directory + "/other.sqlite"
        try SQLiteConnection(path: other).exec("CREATE TABLE t(x)")
        #expect(throws: StoreError.self) { _ = try RoomLogBackup.restore(from: other, to: harness.path, keepingPreviousAs: previous + "2") }
        #expect(!FileManager.default.fileExists(atPath: previous + "2"))
    }

    @Test func migrationBackupNamesSortByTime() {
        #expect(RoomLogBackup.migrationBackupName(fromVersion: 1, nowMs: 1_796_161_679_000) == "rooms-schema1-20261201T214759Z.sqlite")
    }
}
