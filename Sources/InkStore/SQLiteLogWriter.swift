/// Applies groups of writes in one transaction each, on the writer thread only.
final class SQLiteLogWriter {
    private let db: SQLiteConnection
    private let insertRoom: SQLiteStatement
    private let insertBatch: SQLiteStatement
    private let touchRoom: SQLiteStatement
    private let upsertSnapshot: SQLiteStatement
    private let rememberCompacted: SQLiteStatement
    private let compact: SQLiteStatement
    private let deleteBatches: SQLiteStatement
    private let deleteSnapshot: SQLiteStatement
    private let deleteCompacted: SQLiteStatement
    private let deleteRoom: SQLiteStatement
    private let insertBlob: SQLiteStatement
    private let deleteBlobs: SQLiteStatement
    private var statements: [SQLiteStatement] { [insertRoom, insertBatch, touchRoom, upsertSnapshot, rememberCompacted, compact, deleteBatches, deleteSnapshot, deleteCompacted, deleteRoom, insertBlob, deleteBlobs] }

    init(db: SQLiteConnection) throws(StoreError) {
        self.db = db
        insertRoom = try db.prepare("INSERT INTO rooms(id, name, created_ms, last_activity_ms, retention) VALUES(?1, ?2, ?3, ?3, ?4)")
        insertBatch = try db.prepare(
            "INSERT INTO batches(room_id, room_seq, origin, origin_seq, author, received_ms, payload, crc32) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
        touchRoom = try db.prepare("UPDATE rooms SET last_activity_ms = max(last_activity_ms, ?2) WHERE id = ?1")
        upsertSnapshot = try db.prepare(
            "INSERT OR REPLACE INTO snapshots(room_id, upto_room_seq, payload, digest, created_ms) VALUES(?1, ?2, ?3, ?4, ?5)")
        rememberCompacted = try db.prepare("""
            INSERT INTO compacted_origins(room_id, origin, max_origin_seq)
            SELECT room_id, origin, max(origin_seq) FROM batches WHERE room_id = ?1 AND room_seq <= ?2 GROUP BY origin
            ON CONFLICT(room_id, origin) DO UPDATE SET max_origin_seq = max(max_origin_seq, excluded.max_origin_seq)
            """)
        compact = try db.prepare("DELETE FROM batches WHERE room_id = ?1 AND room_seq <= ?2")
        deleteBatches = try db.prepare("DELETE FROM batches WHERE room_id = ?1")
        deleteSnapshot = try db.prepare("DELETE FROM snapshots WHERE room_id = ?1")
        deleteCompacted = try db.prepare("DELETE FROM compacted_origins WHERE room_id = ?1")
        deleteRoom = try db.prepare("DELETE FROM rooms WHERE id = ?1")
        insertBlob = try db.prepare("INSERT OR IGNORE INTO blobs(room_id, hash, bytes, crc32, created_ms) VALUES(?1, ?2, ?3, ?4, ?5)")
        deleteBlobs = try db.prepare("DELETE FROM blobs WHERE room_id = ?1")
    }

    /// Commits `ops` all or nothing.
    func apply(_ ops: ArraySlice<StoreOp>) throws(StoreError) {
        try db.exec("BEGIN IMMEDIATE")
        do {
            var activity: [Int64: UInt64] = [:]
            for op in ops {
                try apply(op)
                if case let .append(id, record) = op { activity[id] = max(activity[id] ?? 0, record.receivedAtMs) }
            }
            // Once per room per commit, not once per batch.
            for (id, ms) in activity.sorted(by: { $0.key < $1.key }) {
                touchRoom.bind(1, id)
                touchRoom.bind(2, ms)
                try touchRoom.run()
            }
            try db.exec("COMMIT")
        } catch {
            for statement in statements { statement.reset() }
            try? db.exec("ROLLBACK")
            throw error
        }
    }

    private func apply(_ op: StoreOp) throws(StoreError) {
        switch op {
        case let .createRoom(id, name, createdAtMs, retention):
            insertRoom.bind(1, id)
            insertRoom.bind(2, name)
            insertRoom.bind(3, createdAtMs)
            insertRoom.bind(4, Int64(retention.rawValue))
            try insertRoom.run()
        case let .append(id, record):
            insertBatch.bind(1, id)
            insertBatch.bind(2, record.roomSeq)
            insertBatch.bind(3, record.origin)
            insertBatch.bind(4, record.originSeq)
            insertBatch.bind(5, record.author)
            insertBatch.bind(6, record.receivedAtMs)
            insertBatch.bind(7, record.payload)
            insertBatch.bind(8, Int64(Checksum.crc32(record.payload)))
            try insertBatch.run()
        case let .snapshot(id, snapshot, shouldCompact):
            upsertSnapshot.bind(1, id)
            upsertSnapshot.bind(2, snapshot.uptoRoomSeq)
            upsertSnapshot.bind(3, snapshot.payload)
            upsertSnapshot.bind(4, snapshot.digest)
            upsertSnapshot.bind(5, snapshot.createdAtMs)
            try upsertSnapshot.run()
            if shouldCompact {
                rememberCompacted.bind(1, id)
                rememberCompacted.bind(2, snapshot.uptoRoomSeq)
                try rememberCompacted.run()
                compact.bind(1, id)
                compact.bind(2, snapshot.uptoRoomSeq)
                try compact.run()
            }
        case let .putBlob(id, blob):
            insertBlob.bind(1, id)
            insertBlob.bind(2, blob.hash)
            insertBlob.bind(3, blob.bytes)
            insertBlob.bind(4, Int64(Checksum.crc32(blob.bytes)))
            insertBlob.bind(5, blob.createdAtMs)
            try insertBlob.run()
        case let .deleteRoom(id):
            for statement in [deleteBatches, deleteSnapshot, deleteCompacted, deleteBlobs, deleteRoom] {
                statement.bind(1, id)
                try statement.run()
            }
        }
    }
}
