/// A blob as a room stores it: its content hash (the caller's, SHA-256 for backgrounds) and
/// its bytes. The store keys blobs by hash and never hashes them itself.
public struct StoredBlob: Sendable, Equatable {
    public var hash: [UInt8]
    public var bytes: [UInt8]
    public var createdAtMs: UInt64

    public init(hash: [UInt8], bytes: [UInt8], createdAtMs: UInt64) {
        self.hash = hash
        self.bytes = bytes
        self.createdAtMs = createdAtMs
    }
}

/// What a room keeps once a snapshot covers a prefix of its log.
public enum Retention: UInt8, Sendable, Equatable, CustomStringConvertible {
    /// Keep every batch forever (replay, export); snapshots only speed up history sync.
    case full = 0
    /// Delete the batches a durable snapshot covers (compaction).
    case board = 1

    public var description: String { self == .full ? "full" : "board" }
}

/// When an appended batch counts as durable.
public enum Durability: String, Sendable, Equatable, CaseIterable {
    /// One transaction and one fsync per appended batch.
    case always
    /// Group commit: appends collected for a few milliseconds share one transaction and fsync.
    case batch
    /// Group commit without fsync: survives a process crash, not a power cut.
    case off
}

/// A batch the caller wants appended; the store assigns its `roomSeq`.
public struct NewBatch: Sendable, Equatable {
    public var room: String
    /// The producing daemon or device (see architecture.md, identifiers).
    public var origin: UInt64
    /// The producer's own sequence number; `(origin, originSeq)` is unique per room.
    public var originSeq: UInt64
    /// Member id of whoever drew it.
    public var author: String
    /// Wall-clock milliseconds when the daemon accepted it (kept for replay).
    public var receivedAtMs: UInt64
    /// One command batch in the compact binary encoding; opaque to the store.
    public var payload: [UInt8]
    /// The `roomSeq` the caller (the relay) already gave this batch; when set, the store
    /// appends only at exactly that position and otherwise throws `roomSeqMismatch`, so the
    /// durable log can never number a batch differently from what members were sent.
    public var expectedRoomSeq: UInt64?

    public init(room: String, origin: UInt64, originSeq: UInt64, author: String, receivedAtMs: UInt64, payload: [UInt8],
                expectedRoomSeq: UInt64? = nil) {
        self.room = room
        self.origin = origin
        self.originSeq = originSeq
        self.author = author
        self.receivedAtMs = receivedAtMs
        self.payload = payload
        self.expectedRoomSeq = expectedRoomSeq
    }
}

/// A batch as stored in a room's log.
public struct BatchRecord: Sendable, Equatable {
    public var roomSeq: UInt64
    public var origin: UInt64
    public var originSeq: UInt64
    public var author: String
    public var receivedAtMs: UInt64
    public var payload: [UInt8]

    public init(roomSeq: UInt64, origin: UInt64, originSeq: UInt64, author: String, receivedAtMs: UInt64, payload: [UInt8]) {
        self.roomSeq = roomSeq
        self.origin = origin
        self.originSeq = originSeq
        self.author = author
        self.receivedAtMs = receivedAtMs
        self.payload = payload
    }
}

/// What `append` did with a batch.
public enum AppendOutcome: Sendable, Equatable {
    /// Appended at this room sequence number; durable once `pollDurable` reports it.
    case appended(roomSeq: UInt64)
    /// `(origin, originSeq)` is already in the room at this sequence number; nothing appended.
    case duplicate(roomSeq: UInt64)
}

/// Everything of `room` up to and including `roomSeq` is durable.
public struct DurableMark: Sendable, Equatable, CustomStringConvertible {
    public var room: String
    public var roomSeq: UInt64
    public init(room: String, roomSeq: UInt64) {
        self.room = room
        self.roomSeq = roomSeq
    }
    public var description: String { "\(room)@\(roomSeq)" }
}

/// A board state that folds the room's log up to `uptoRoomSeq`; history sync = snapshot + tail.
public struct RoomSnapshot: Sendable, Equatable {
    public var uptoRoomSeq: UInt64
    /// The board, encoded by the caller; opaque to the store.
    public var payload: [UInt8]
    /// The board digest the caller computed, handed to syncing members for verification.
    public var digest: [UInt8]
    public var createdAtMs: UInt64

    public init(uptoRoomSeq: UInt64, payload: [UInt8], digest: [UInt8], createdAtMs: UInt64) {
        self.uptoRoomSeq = uptoRoomSeq
        self.payload = payload
        self.digest = digest
        self.createdAtMs = createdAtMs
    }
}

/// One bounded page of a room's log, for chunked history sync.
public struct TailPage: Sendable, Equatable {
    /// Consecutive batches, ascending, starting right after the requested sequence number.
    public var records: [BatchRecord]
    /// Pass this as `after` to read the next page.
    public var nextAfter: UInt64
    /// True when the page reaches the room's last appended batch.
    public var reachedEnd: Bool
}

/// Where a room stands (reopened on start exactly where it was).
public struct RoomInfo: Sendable, Equatable {
    public var name: String
    public var createdAtMs: UInt64
    public var lastActivityMs: UInt64
    public var retention: Retention
    /// The last sequence number appended (0: none yet).
    public var lastRoomSeq: UInt64
    /// The last sequence number known durable.
    public var durableRoomSeq: UInt64
    /// The first batch still in the log; `lastRoomSeq + 1` when the log holds none.
    public var firstRoomSeq: UInt64
    /// What the latest snapshot covers (0: no snapshot).
    public var snapshotUptoRoomSeq: UInt64
    /// Batches still in the log and their payload bytes (what the history size limit counts).
    public var recordCount: Int
    public var historyBytes: Int
    /// Blobs stored (durable or not yet) and their bytes (what the room's blob quota counts).
    public var blobCount = 0
    public var blobBytes = 0
}

/// Figures for metrics. Counters only grow for the life of one store object.
public struct StoreUsage: Sendable, Equatable {
    public var rooms = 0
    public var records = 0
    public var historyBytes = 0
    /// Appended or written but not yet durable.
    public var pendingOps = 0
    public var pendingBytes = 0
    public var appends: UInt64 = 0
    public var duplicates: UInt64 = 0
    public var refusedAppends: UInt64 = 0
    public var commits: UInt64 = 0
    public var failedCommits: UInt64 = 0
    public var diskFullErrors: UInt64 = 0
    public var ioErrors: UInt64 = 0
    /// Longest and latest commit, in microseconds (transaction + fsync).
    public var lastCommitMicros: UInt64 = 0
    public var maxCommitMicros: UInt64 = 0
    /// Sum over all commits, for the mean (`totalCommitMicros / commits`).
    public var totalCommitMicros: UInt64 = 0
    public var expiredRooms: UInt64 = 0
    public init() {}
}

/// Bounds on what the store accepts. Every one is named so bad input gives a typed error.
public struct StoreLimits: Sendable, Equatable {
    /// Longest room name, in UTF-8 bytes.
    public static let maxRoomNameBytes = 128
    /// Longest author (member id), in UTF-8 bytes.
    public static let maxAuthorBytes = 128
    /// Longest snapshot digest, in bytes (SHA-512 fits).
    public static let maxDigestBytes = 64
    /// Highest room sequence number: SQLite integers are signed 64-bit.
    public static let maxRoomSeq = UInt64(Int64.max)

    /// Largest payload of one batch.
    public var maxPayloadBytes = 256 * 1024
    /// Largest snapshot payload.
    public var maxSnapshotBytes = 64 * 1024 * 1024
    /// Largest history (payload bytes of the batches kept) of one room; appends beyond fail.
    public var maxRoomHistoryBytes = 256 * 1024 * 1024
    /// Most rooms in one store.
    public var maxRooms = 10_000
    /// Appends and snapshots not yet durable; beyond either bound `append` refuses (backlog).
    public var maxPendingOps = 65_536
    public var maxPendingBytes = 64 * 1024 * 1024
    /// A room with no append for this long is deleted by `expireIdleRooms` (0: never).
    public var idleRoomExpiryMs: UInt64 = 30 * 24 * 3600 * 1000
    /// Producers per room whose highest originSeq is kept in memory, so `append` recognises a
    /// new batch without a database lookup; rooms with more origins fall back to lookups.
    public var maxTrackedOriginsPerRoom = 1024
    /// Most batches one `readTail` page holds.
    public var maxPageRecords = 4096
    /// Largest blob (one background image), in bytes (`--max-background-bytes`).
    public var maxBlobBytes = 4 * 1024 * 1024
    /// Most blob bytes one room stores (`--room-background-quota-bytes`); blobs are never
    /// deleted while the room exists, so this bounds a room's images for its lifetime.
    public var maxRoomBlobBytes = 64 * 1024 * 1024
    /// Longest blob hash, in bytes (SHA-512 fits).
    public static let maxBlobHashBytes = 64

    public init() {}
}
