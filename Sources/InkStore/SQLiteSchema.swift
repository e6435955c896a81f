/// The on-disk schema, versioned with `PRAGMA user_version`.
///
/// `migrations[i]` takes a database from version `i` to `i + 1`, inside one transaction; a new
/// version appends one entry and never edits an old one. Integers are SQLite's signed 64-bit:
/// unsigned values are stored by bit pattern (sequence numbers stay below 2^63).
enum SQLiteSchema {
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
    ]

    static var currentVersion: Int { migrations.count }

    /// Brings the database to `currentVersion`; refuses a database from a newer release.
    static func migrate(_ db: SQLiteConnection) throws(StoreError) {
        let found = Int(try db.scalar("PRAGMA user_version"))
        guard found <= currentVersion else { throw .schemaTooNew(found: found, supported: currentVersion) }
        for version in found..<currentVersion {
            try db.exec("BEGIN IMMEDIATE")
            do {
                try db.exec(migrations[version])
                try db.exec("PRAGMA user_version = \(version + 1)")
                try db.exec("COMMIT")
            } catch {
                try? db.exec("ROLLBACK")
                throw error
            }
        }
    }
}
