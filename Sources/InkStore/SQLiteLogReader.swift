/// Reads committed data through its own connection on the caller's thread. In WAL mode a
/// reader never waits for the writer thread and sees every transaction committed before
/// each statement starts (each statement is reset after use, ending its read transaction).
final class SQLiteLogReader: LogReader {
    private let db: SQLiteConnection
    private let selectRooms: SQLiteStatement
    private let roomUsage: SQLiteStatement
    private let snapshotUpto: SQLiteStatement
    private let findBatch: SQLiteStatement
    private let findCompacted: SQLiteStatement
    private let selectTail: SQLiteStatement
    private let selectSnapshot: SQLiteStatement
    private let rangeUsage: SQLiteStatement
    private let originHighWater: SQLiteStatement
    private let listBlobs: SQLiteStatement
    private let selectBlob: SQLiteStatement

    init(db: SQLiteConnection) throws(StoreError) {
        self.db = db
        selectRooms = try db.prepare("SELECT id, name, created_ms, last_activity_ms, retention FROM rooms ORDER BY id")
        roomUsage = try db.prepare(
            "SELECT count(*), coalesce(sum(length(payload)), 0), coalesce(min(room_seq), 0), coalesce(max(room_seq), 0) FROM batches WHERE room_id = ?1")
        snapshotUpto = try db.prepare("SELECT upto_room_seq FROM snapshots WHERE room_id = ?1")
        findBatch = try db.prepare("SELECT room_seq FROM batches WHERE room_id = ?1 AND origin = ?2 AND origin_seq = ?3")
        findCompacted = try db.prepare("SELECT max_origin_seq FROM compacted_origins WHERE room_id = ?1 AND origin = ?2")
        selectTail = try db.prepare(
            "SELECT room_seq, origin, origin_seq, author, received_ms, payload, crc32 FROM batches WHERE room_id = ?1 AND room_seq > ?2 ORDER BY room_seq LIMIT ?3")
        selectSnapshot = try db.prepare("SELECT upto_room_seq, payload, digest, created_ms FROM snapshots WHERE room_id = ?1")
        rangeUsage = try db.prepare(
            "SELECT count(*), coalesce(sum(length(payload)), 0), coalesce(max(room_seq), 0) FROM batches WHERE room_id = ?1 AND room_seq BETWEEN ?2 AND ?3")
        originHighWater = try db.prepare("""
            SELECT room_id, origin, max(origin_seq) FROM batches GROUP BY room_id, origin
            UNION ALL SELECT room_id, origin, max_origin_seq FROM compacted_origins ORDER BY 1, 2, 3
            """)
        listBlobs = try db.prepare("SELECT room_id, hash, length(bytes) FROM blobs ORDER BY room_id, hash")
        selectBlob = try db.prepare("SELECT bytes, crc32 FROM blobs WHERE room_id = ?1 AND hash = ?2")
    }

    func loadBlobs() throws(StoreError) -> [(roomId: Int64, hash: [UInt8], size: Int)] {
        defer { listBlobs.reset() }
        var entries: [(roomId: Int64, hash: [UInt8], size: Int)] = []
        while try listBlobs.step() { entries.append((listBlobs.int64(0), listBlobs.bytes(1), Int(listBlobs.int64(2)))) }
        return entries
    }

    func blob(roomId: Int64, hash: [UInt8]) throws(StoreError) -> [UInt8]? {
        selectBlob.bind(1, roomId)
        selectBlob.bind(2, hash)
        defer { selectBlob.reset() }
        guard try selectBlob.step() else { return nil }
        let bytes = selectBlob.bytes(0)
        guard UInt32(truncatingIfNeeded: selectBlob.int64(1)) == Checksum.crc32(bytes) else { throw .corruptBlob(room: "") }
        return bytes
    }

    func loadOriginHighWater() throws(StoreError) -> [(roomId: Int64, origin: UInt64, originSeq: UInt64)] {
        defer { originHighWater.reset() }
        var entries: [(roomId: Int64, origin: UInt64, originSeq: UInt64)] = []
        while try originHighWater.step() {
            entries.append((originHighWater.int64(0), originHighWater.uint64(1), originHighWater.uint64(2)))
        }
        return entries
    }

    func loadRooms() throws(StoreError) -> [LoadedRoom] {
        try db.exec("BEGIN")  // one consistent view of every room
        defer { try? db.exec("COMMIT") }
        var rooms: [LoadedRoom] = []
        defer { selectRooms.reset() }
        while try selectRooms.step() {
            rooms.append(LoadedRoom(
                id: selectRooms.int64(0), name: selectRooms.string(1), createdAtMs: selectRooms.uint64(2),
                lastActivityMs: selectRooms.uint64(3), retention: Retention(rawValue: UInt8(clamping: selectRooms.int64(4))) ?? .full,
                recordCount: 0, historyBytes: 0, minRoomSeq: 0, maxRoomSeq: 0, snapshotUpto: 0))
        }
        for index in rooms.indices {
            roomUsage.bind(1, rooms[index].id)
            defer { roomUsage.reset() }
            if try roomUsage.step() {
                rooms[index].recordCount = Int(roomUsage.int64(0))
                rooms[index].historyBytes = Int(roomUsage.int64(1))
                rooms[index].minRoomSeq = roomUsage.uint64(2)
                rooms[index].maxRoomSeq = roomUsage.uint64(3)
            }
            snapshotUpto.bind(1, rooms[index].id)
            defer { snapshotUpto.reset() }
            if try snapshotUpto.step() { rooms[index].snapshotUpto = snapshotUpto.uint64(0) }
        }
        return rooms
    }

    func find(roomId: Int64, origin: UInt64, originSeq: UInt64) throws(StoreError) -> UInt64? {
        findBatch.bind(1, roomId)
        findBatch.bind(2, origin)
        findBatch.bind(3, originSeq)
        defer { findBatch.reset() }
        if try findBatch.step() { return findBatch.uint64(0) }
        findCompacted.bind(1, roomId)
        findCompacted.bind(2, origin)
        defer { findCompacted.reset() }
        if try findCompacted.step(), originSeq <= findCompacted.uint64(0) { return 0 }
        return nil
    }

    func read(roomId: Int64, after: UInt64, maxRecords: Int, maxBytes: Int) throws(StoreError) -> [BatchRecord] {
        selectTail.bind(1, roomId)
        selectTail.bind(2, after)
        selectTail.bind(3, Int64(maxRecords))
        defer { selectTail.reset() }
        var records: [BatchRecord] = []
        var bytes = 0
        while try selectTail.step() {
            let payload = selectTail.bytes(5)
            guard records.isEmpty || bytes + payload.count <= maxBytes else { break }
            let seq = selectTail.uint64(0)
            guard UInt32(truncatingIfNeeded: selectTail.int64(6)) == Checksum.crc32(payload) else {
                throw .corruptRecord(room: "", roomSeq: seq)
            }
            records.append(BatchRecord(
                roomSeq: seq, origin: selectTail.uint64(1), originSeq: selectTail.uint64(2), author: selectTail.string(3),
                receivedAtMs: selectTail.uint64(4), payload: payload))
            bytes += payload.count
        }
        return records
    }

    func snapshot(roomId: Int64) throws(StoreError) -> RoomSnapshot? {
        selectSnapshot.bind(1, roomId)
        defer { selectSnapshot.reset() }
        guard try selectSnapshot.step() else { return nil }
        return RoomSnapshot(
            uptoRoomSeq: selectSnapshot.uint64(0), payload: selectSnapshot.bytes(1), digest: selectSnapshot.bytes(2),
            createdAtMs: selectSnapshot.uint64(3))
    }

    func usage(roomId: Int64, from: UInt64, upto: UInt64) throws(StoreError) -> (count: Int, bytes: Int, maxSeq: UInt64) {
        rangeUsage.bind(1, roomId)
        rangeUsage.bind(2, from)
        rangeUsage.bind(3, upto)
        defer { rangeUsage.reset() }
        guard try rangeUsage.step() else { return (0, 0, 0) }
        return (Int(rangeUsage.int64(0)), Int(rangeUsage.int64(1)), rangeUsage.uint64(2))
    }
}
