/// What opening a room log did to a database that held an older schema.
public struct SchemaMigration: Sendable, Equatable {
    public let fromVersion: Int
    public let toVersion: Int
    /// The copy taken before the first step (`RoomLogBackup.copy`).
    public let backupPath: String
}

/// The on-disk schema, versioned with `PRAGMA user_version`.
///
/// `migrations[i]` takes a database from version `i` to `i + 1`, inside one transaction; a new
/// version appends one entry and never edits an old one. Integers are SQLite's signed 64-bit:
/// unsigned values are stored by bit pattern (sequence numbers stay below 2^63).
public enum SQLiteSchema {
    static let migrations: [String] = [
        // 0 -> 1: rooms, their batches, the latest snapshot of each, and what compaction forgot.
        """
        CREATE TABLE rooms(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_ms INTEGER NOT NULL,
            last_activity_ms INTEGER NOT NULL,
            retention INTEGER NOT NULL
        );
        CREATE TABLE batches(
            room_id INTEGER NOT NULL,
            room_seq INTEGER NOT NULL,
            origin INTEGER NOT NULL,
            origin_seq INTEGER NOT NULL,
            author TEXT NOT NULL,
            received_ms INTEGER NOT NULL,
            payload BLOB NOT NULL,
            crc32 INTEGER NOT NULL,
            PRIMARY KEY(room_id, room_seq)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX batches_by_origin ON batches(room_id, origin, origin_seq);
        CREATE TABLE snapshots(
            room_id INTEGER PRIMARY KEY,
            upto_room_seq INTEGER NOT NULL,
            payload BLOB NOT NULL,
            digest BLOB NOT NULL,
            created_ms INTEGER NOT NULL
        );
        CREATE TABLE compacted_origins(
            room_id INTEGER NOT NULL,
            origin INTEGER NOT NULL,
            max_origin_seq INTEGER NOT NULL,
            PRIMARY KEY(room_id, origin)
        ) WITHOUT ROWID;
        """,
        // 1 -> 2: which release applied each schema version, and when (`SchemaHistory`); the
        // file is marked as an Inkwire room log (`PRAGMA application_id`, set by `migrate`).
        """
        CREATE TABLE schema_history(
            version INTEGER PRIMARY KEY,
            applied_ms INTEGER NOT NULL,
            applied_by TEXT NOT NULL
        );
        """,
        // 2 -> 3: content-addressed blobs (background images), each stored once per room.
        """
        CREATE TABLE blobs(
            room_id INTEGER NOT NULL,
            hash BLOB NOT NULL,
            bytes BLOB NOT NULL,
            crc32 INTEGER NOT NULL,
            created_ms INTEGER NOT NULL,
            PRIMARY KEY(room_id, hash)
        ) WITHOUT ROWID;
        """,
    ]

    /// The schema this release reads and writes.
    public static var currentVersion: Int { migrations.count }

    /// `PRAGMA application_id` of an Inkwire room log: "InkW". Version 1 files have 0.
    static let applicationID: Int32 = 0x496E_6B57

    /// The schema version of the open database (`PRAGMA user_version`).
    static func version(_ db: SQLiteConnection) throws(StoreError) -> Int { Int(try db.scalar("PRAGMA user_version")) }

    /// Brings the database to `currentVersion`; refuses a database from a newer release. A
    /// database that already holds a schema is first copied to `backupDirectory` (one file per
    /// migration, named after the old version and the time); no copy, no migration.
    static func migrate(_ db: SQLiteConnection, backupDirectory: String, appliedBy: String,
                        nowMs: UInt64) throws(StoreError) -> SchemaMigration? {
        let found = try version(db)
        guard found <= currentVersion else { throw .schemaTooNew(found: found, supported: currentVersion) }
        guard found < currentVersion else { return nil }
        var migration: SchemaMigration?
        if found > 0 {
            let path = backupDirectory + "/" + RoomLogBackup.migrationBackupName(fromVersion: found, nowMs: nowMs)
            try RoomLogBackup.makeDirectory(backupDirectory)
            _ = try RoomLogBackup.copy(from: db, to: path)
            migration = SchemaMigration(fromVersion: found, toVersion: currentVersion, backupPath: path)
        }
        for version in found..<currentVersion {
            try db.exec("BEGIN IMMEDIATE")
            do {
                try db.exec(migrations[version])
                if version + 1 >= 2 {
                    let record = try db.prepare("INSERT INTO schema_history(version, applied_ms, applied_by) VALUES (?, ?, ?)")
                    record.bind(1, Int64(version + 1))
                    record.bind(2, nowMs)
                    record.bind(3, appliedBy)
                    try record.run()
                }
                try db.exec("PRAGMA application_id = \(applicationID)")
                try db.exec("PRAGMA user_version = \(version + 1)")
                try db.exec("COMMIT")
            } catch {
                try? db.exec("ROLLBACK")
                throw error
            }
        }
        return migration
    }
}
