/// One write, queued in order and committed (alone or in a group) by a `CommitPipe`.
/// Rooms are addressed by a numeric id the front assigns, so a deleted room's name can be
/// reused while its deletion still waits in the queue.
enum StoreOp: Sendable {
    case createRoom(id: Int64, name: String, createdAtMs: UInt64, retention: Retention)
    case append(roomId: Int64, record: BatchRecord)
    /// Replaces the room's snapshot; `compact` deletes the batches it covers.
    case snapshot(roomId: Int64, snapshot: RoomSnapshot, compact: Bool)
    case deleteRoom(roomId: Int64)
    /// Stores a content-addressed blob (a background image) once per room; submitted before
    /// the batch that names it, so that batch is never durable without it.
    case putBlob(roomId: Int64, blob: StoredBlob)

    /// What this write weighs in the pending backlog.
    var byteCount: Int {
        switch self {
        case .createRoom(_, let name, _, _): name.utf8.count
        case .append(_, let record): record.payload.count + record.author.utf8.count
        case .snapshot(_, let snapshot, _): snapshot.payload.count + snapshot.digest.count
        case .deleteRoom: 0
        case .putBlob(_, let blob): blob.hash.count + blob.bytes.count
        }
    }
}

/// A room as found on storage when the store opens.
struct LoadedRoom {
    var id: Int64
    var name: String
    var createdAtMs: UInt64
    var lastActivityMs: UInt64
    var retention: Retention
    var recordCount: Int
    var historyBytes: Int
    /// Lowest and highest batch in the log (0 when it holds none).
    var minRoomSeq: UInt64
    var maxRoomSeq: UInt64
    var snapshotUpto: UInt64
}

/// Reads what is committed. Called on the caller's (loop) thread only.
protocol LogReader: AnyObject {
    func loadRooms() throws(StoreError) -> [LoadedRoom]
    /// Per room and origin, the highest originSeq stored or compacted.
    func loadOriginHighWater() throws(StoreError) -> [(roomId: Int64, origin: UInt64, originSeq: UInt64)]
    /// The batch's room sequence number, 0 when compaction removed it, nil when never seen.
    func find(roomId: Int64, origin: UInt64, originSeq: UInt64) throws(StoreError) -> UInt64?
    /// Committed batches after `after`, ascending, within the record and byte budget.
    /// A checksum failure throws `corruptRecord` with an empty room name (the front fills it).
    func read(roomId: Int64, after: UInt64, maxRecords: Int, maxBytes: Int) throws(StoreError) -> [BatchRecord]
    func snapshot(roomId: Int64) throws(StoreError) -> RoomSnapshot?
    /// Committed batches with `from <= roomSeq <= upto`: how many, their payload bytes, the highest.
    func usage(roomId: Int64, from: UInt64, upto: UInt64) throws(StoreError) -> (count: Int, bytes: Int, maxSeq: UInt64)
    /// Every committed blob's room, hash and size.
    func loadBlobs() throws(StoreError) -> [(roomId: Int64, hash: [UInt8], size: Int)]
    /// A committed blob's bytes; a checksum failure throws `corruptBlob` with an empty room name.
    func blob(roomId: Int64, hash: [UInt8]) throws(StoreError) -> [UInt8]?
}

/// What a pipe did since the last `drain`.
struct PipeReport {
    /// Writes now durable, in submission order.
    var committed: [StoreOp] = []
    var failures: [StoreError] = []
    var commits: UInt64 = 0
    var lastCommitMicros: UInt64 = 0
    var maxCommitMicros: UInt64 = 0
    var totalCommitMicros: UInt64 = 0
}

/// Takes writes in order and makes them durable: inline (memory) or on a writer thread (SQLite).
protocol CommitPipe: AnyObject {
    func submit(_ op: StoreOp)
    func drain() -> PipeReport
    /// Waits until every submitted write is durable; throws the first failure meanwhile.
    func flush() throws(StoreError)
    func close()
}
