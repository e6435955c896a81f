/// Why the store refused or failed. SQLite failures keep SQLite's result code and message.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The storage engine failed; `code` is the SQLite (extended) result code.
    case storage(code: Int32, message: String, context: String)
    case invalidRoomName(String)
    case authorTooLong(bytes: Int)
    case payloadTooLarge(bytes: Int, limit: Int)
    case snapshotTooLarge(bytes: Int, limit: Int)
    case digestTooLong(bytes: Int)
    case roomNotFound(String)
    case roomExists(String)
    case tooManyRooms(limit: Int)
    case roomSeqExhausted(room: String)
    /// `NewBatch.expectedRoomSeq` is not the room's next sequence number; nothing was appended.
    case roomSeqMismatch(room: String, next: UInt64, expected: UInt64)
    /// Producer sequence numbers stay below 2^63 (SQLite integers are signed).
    case originSeqTooLarge(UInt64)
    /// The room's kept history would pass `StoreLimits.maxRoomHistoryBytes`.
    case roomHistoryFull(room: String, bytes: Int, limit: Int)
    /// Too much is waiting to become durable (slow or failing disk); `lastFailure` says why.
    case backlogFull(pendingOps: Int, pendingBytes: Int, lastFailure: String?)
    /// The batches after `after` up to `firstAvailable - 1` were compacted into a snapshot.
    case historyCompacted(room: String, firstAvailable: UInt64)
    /// A snapshot must cover an appended prefix, and never less than the previous one.
    case snapshotOutOfRange(room: String, upto: UInt64, last: UInt64, previous: UInt64)
    /// A stored record fails its checksum.
    case corruptRecord(room: String, roomSeq: UInt64)
    /// The database was written by a newer Inkwire.
    case schemaTooNew(found: Int, supported: Int)
    case closed
    /// A blob past `StoreLimits.maxBlobBytes`, or empty.
    case blobTooLarge(bytes: Int, limit: Int)
    /// The room's blobs would pass `StoreLimits.maxRoomBlobBytes`.
    case roomBlobQuotaFull(room: String, bytes: Int, limit: Int)
    /// A blob hash of 0 or more than `StoreLimits.maxBlobHashBytes` bytes.
    case invalidBlobHash(bytes: Int)
    /// A stored blob whose bytes fail their checksum.
    case corruptBlob(room: String)

    /// SQLITE_FULL: the disk (or the database's page limit) is full.
    public static let sqliteFull: Int32 = 13
    /// SQLITE_IOERR: a read, write or fsync failed.
    public static let sqliteIOErr: Int32 = 10

    /// True for a full disk (primary code SQLITE_FULL).
    public var isDiskFull: Bool {
        if case .storage(let code, _, _) = self { return code & 0xff == StoreError.sqliteFull }
        return false
    }

    /// True for an I/O error (primary code SQLITE_IOERR).
    public var isIOError: Bool {
        if case .storage(let code, _, _) = self { return code & 0xff == StoreError.sqliteIOErr }
        return false
    }

    public var description: String {
        switch self {
        case let .storage(code, message, context): "storage error \(code) (\(message)) while \(context)"
        case let .invalidRoomName(name): "invalid room name \"\(name.prefix(40))\" (1...\(StoreLimits.maxRoomNameBytes) UTF-8 bytes)"
        case let .authorTooLong(bytes): "author is \(bytes) bytes, limit \(StoreLimits.maxAuthorBytes)"
        case let .payloadTooLarge(bytes, limit): "batch payload is \(bytes) bytes, limit \(limit)"
        case let .snapshotTooLarge(bytes, limit): "snapshot is \(bytes) bytes, limit \(limit)"
        case let .digestTooLong(bytes): "snapshot digest is \(bytes) bytes, limit \(StoreLimits.maxDigestBytes)"
        case let .roomNotFound(room): "no room \"\(room)\""
        case let .roomExists(room): "room \"\(room)\" exists"
        case let .tooManyRooms(limit): "too many rooms (limit \(limit))"
        case let .roomSeqExhausted(room): "room \"\(room)\" has used every sequence number"
        case let .roomSeqMismatch(room, next, expected): "room \"\(room)\" is at \(next), the batch expects \(expected)"
        case let .originSeqTooLarge(seq): "origin sequence number \(seq) is above \(StoreLimits.maxRoomSeq)"
        case let .roomHistoryFull(room, bytes, limit): "room \"\(room)\" history would be \(bytes) bytes, limit \(limit)"
        case let .backlogFull(ops, bytes, failure): "\(ops) writes (\(bytes) bytes) wait to become durable" + (failure.map { "; last failure: \($0)" } ?? "")
        case let .historyCompacted(room, first): "room \"\(room)\" history before \(first) is compacted into a snapshot"
        case let .snapshotOutOfRange(room, upto, last, previous): "snapshot of \"\(room)\" up to \(upto) is outside \(previous)...\(last)"
        case let .corruptRecord(room, seq): "record \(seq) of room \"\(room)\" fails its checksum"
        case let .schemaTooNew(found, supported): "database schema \(found) is newer than \(supported)"
        case let .blobTooLarge(bytes, limit): "blob is \(bytes) bytes, limit 1...\(limit)"
        case let .roomBlobQuotaFull(room, bytes, limit): "room \"\(room)\" blobs would be \(bytes) bytes, limit \(limit)"
        case let .invalidBlobHash(bytes): "blob hash is \(bytes) bytes (1...\(StoreLimits.maxBlobHashBytes))"
        case let .corruptBlob(room): "a blob of room \"\(room)\" fails its checksum"
        case .closed: "store is closed"
        }
    }
}
