// The application messages between a device and the daemon (docs/protocol.md, "Session
// messages"). One message travels as one ARQ message over UDP, or as one length-prefixed frame
// over TCP. Batch payloads are compact binary codec bytes, opaque to this layer.
import InkCodec

/// What a member may do in a room. Raw values are the wire values.
public enum MemberRole: UInt8, Hashable, Comparable, Sendable, CaseIterable, CustomStringConvertible {
    /// The room's owner: draws, grants and revokes the right to draw, may draw while locked.
    case teacher = 1
    /// Granted the right to draw (a student "on stage").
    case presenter = 2
    /// Watches only.
    case viewer = 3

    /// Lower raw value = more rights; `teacher < presenter < viewer`.
    public static func < (a: MemberRole, b: MemberRole) -> Bool { a.rawValue < b.rawValue }

    public var canDraw: Bool { self != .viewer }

    public var description: String {
        switch self {
        case .teacher: "teacher"
        case .presenter: "presenter"
        case .viewer: "viewer"
        }
    }
}

/// What a joining device already has of the room, so the daemon sends only what is missing.
public enum JoinHave: Hashable, Sendable {
    /// A fresh device: send the board as a snapshot, then the tail.
    case nothing
    /// Everything up to and including `roomSeq` is applied; `digest` is the device's board digest
    /// there (0 when unknown). The daemon sends the batches after `roomSeq`.
    case upTo(roomSeq: UInt64, digest: UInt64)
    /// An interrupted snapshot sync: the snapshot taken at `snapshotRoomSeq` was received up to
    /// and including chunk `lastChunk`. Resumes after it when the daemon still holds that
    /// snapshot, else restarts it.
    case partialSnapshot(snapshotRoomSeq: UInt64, lastChunk: UInt32)
}

/// A join, as the device sends it.
public struct JoinRequest: Hashable, Sendable {
    public var room: String
    public var user: String
    public var role: MemberRole
    /// A signed join token from the school's app server; empty in open mode.
    public var token: [UInt8]
    /// The device's producer id: `(origin, originSeq)` names each of its batches in the room.
    public var origin: UInt64
    public var have: JoinHave

    public init(room: String, user: String, role: MemberRole, token: [UInt8] = [], origin: UInt64, have: JoinHave = .nothing) {
        self.room = room
        self.user = user
        self.role = role
        self.token = token
        self.origin = origin
        self.have = have
    }
}

/// Device -> daemon.
public enum ClientMessage: Hashable, Sendable {
    case join(JoinRequest)
    /// One command batch of this member. `originSeq` counts the device's batches from 1; a batch
    /// sent again with the same number (after a reconnect) is acknowledged, not appended twice.
    case batch(originSeq: UInt64, payload: [UInt8])
    /// Teacher only: `user` may draw from now on.
    case grantDraw(user: String)
    /// Teacher only: `user` may no longer draw.
    case revokeDraw(user: String)
    /// Sync progress: every chunk of sync `syncID` up to and including `chunk` is applied. Opens
    /// the window for further chunks and is the point an interrupted sync resumes from.
    case syncAck(syncID: UInt32, chunk: UInt32)
    /// The member leaves the room; the daemon closes the session.
    case leave
    /// Part of an image this member uploads (docs/protocol.md 6a): `data` goes at `offset` of
    /// the `size`-byte blob whose SHA-256 is `hash`. Parts come in order from offset 0; the
    /// daemon answers `blobStored` once the whole blob checks out and is stored (at once, to
    /// the first part, when the room has it already), or `error(blobRefused)`.
    case blobPut(hash: BlobHash, size: UInt32, offset: UInt32, data: [UInt8])
    /// Asks for a blob of the room, from chunk `firstChunk` (0, or where an interrupted fetch
    /// stopped). A device asks only for blobs it does not have.
    case blobRequest(hash: BlobHash, firstChunk: UInt32)
    /// Every chunk of blob `hash` up to and including `chunk` arrived: opens the window.
    case blobAck(hash: BlobHash, chunk: UInt32)
    /// Nothing else to say: the device is still there. A joined device sends it when it has
    /// sent nothing for `SessionKeepalive.interval`; the daemon closes a member it hears
    /// nothing from for its member timeout (`goingAway(idle)`).
    case ping
    /// A kind this version does not know (from a newer device): skipped.
    case unknown(kind: UInt64)
}

/// Why a join was refused. Raw values are the wire values; unknown ones decode as `.other`.
public enum JoinRefusal: UInt16, Hashable, Sendable {
    case other = 0
    case badToken = 1
    case expiredToken = 2
    case tokenMismatch = 3
    case roleNotAllowed = 4
    case roomFull = 5
    case tooManyRooms = 6
    case invalidName = 7
    case alreadyJoined = 8
    case shuttingDown = 9
    /// The device speaks an older protocol (protocol 1: unsealed); it must be updated.
    case unsupportedVersion = 10
    /// A quota of the daemon is reached: this user's or this address's sessions in the room,
    /// or the rooms this address may create per minute; the text says which. Try later.
    case quotaExceeded = 11
}

/// Error codes sent to one session. Raw values are the wire values.
public enum SessionErrorCode: UInt16, Hashable, Sendable {
    case other = 0
    /// The member may not draw (viewer, revoked, or board locked).
    case permissionDenied = 1
    /// Only the teacher may do this (grant, revoke, room commands).
    case notTeacher = 2
    /// The message could not be decoded; it was dropped.
    case malformedMessage = 3
    /// The batch payload is not a valid command batch.
    case malformedBatch = 4
    /// The batch is larger than the daemon accepts.
    case batchTooLarge = 5
    /// The message needs a joined member (send `join` first).
    case notJoined = 6
    /// `grantDraw`/`revokeDraw` named no member of the room.
    case unknownMember = 7
    /// `originSeq` must be at least 1.
    case invalidOriginSeq = 8
    /// The room's kept history reached the daemon's size limit (`--max-room-history-bytes`);
    /// the batch was not relayed. Lasting: a teacher's `clear` (with `--retain board`) frees it.
    case historyFull = 9
    /// The daemon cannot store the batch now (full disk, storage failing and its backlog full);
    /// the batch was not relayed. Passing: send it again later.
    case storageUnavailable = 10
    /// `originSeq` skipped numbers: the daemon expects the next one after the last it took or
    /// refused from this origin (docs/protocol.md 5a). Not appended.
    case originSeqGap = 11
    /// `originSeq` was used before by another batch, or by one the daemon cannot find any more:
    /// this batch is not in the log and will not be. Not appended.
    case originSeqReused = 12
    /// An uploaded blob was refused (not a decodable JPEG or PNG, over the size limit or the
    /// room's quota, parts out of order, a hash that does not match); the text says which.
    case blobRefused = 13
    /// A batch names a background image the room does not have (upload it first). Not appended.
    case unknownBlob = 14
}

/// Why the daemon ends a session. Raw values are the wire values.
public enum GoingAwayReason: UInt16, Hashable, Sendable {
    case other = 0
    case shuttingDown = 1
    case left = 2
    /// Another session joined with the same user and origin (the device reconnected).
    case replaced = 3
    case idle = 4
    case tooManyErrors = 5
    /// The member's join token expired: join again with a new token.
    case tokenExpired = 6
    /// The daemon's token secret changed and the member's token no longer verifies.
    case tokenRevoked = 7
    /// The room was full or the user had its most sessions: this idle session made way for a
    /// teacher or presenter, or for a newer session of the same user. Not rejoined on its own.
    case evicted = 8
}

/// How often a joined device speaks when it has nothing else to say (docs/protocol.md 5a): a
/// `ping` after this long without sending any message, so the daemon can tell a device that
/// merely watches from one that is gone.
public enum SessionKeepalive {
    public static let interval = Instant.Duration.milliseconds(20_000)
}

/// How a sync starts.
public enum SyncMode: UInt8, Hashable, Sendable {
    /// Chunks carry a compacted snapshot (items without room sequence, folding to the board at
    /// `SyncBegin.throughRoomSeq`), then the tail: start from an empty board.
    case snapshot = 0
    /// Chunks carry the log batches after `SyncBegin.afterRoomSeq`, in order: keep the board.
    case tail = 1
}

/// Announces a sync; chunks `firstChunk...` and then `syncDone` follow.
public struct SyncBegin: Hashable, Sendable {
    public var syncID: UInt32
    public var mode: SyncMode
    /// Tail mode: the batches after this one follow. Snapshot mode: the snapshot covers the log
    /// up to and including this room sequence number.
    public var afterRoomSeq: UInt64
    /// The sync ends with the board at this room sequence number (live batches follow it).
    public var throughRoomSeq: UInt64
    /// The first chunk index sent (above 0 when a snapshot sync resumes).
    public var firstChunk: UInt32

    public init(syncID: UInt32, mode: SyncMode, afterRoomSeq: UInt64, throughRoomSeq: UInt64, firstChunk: UInt32) {
        self.syncID = syncID
        self.mode = mode
        self.afterRoomSeq = afterRoomSeq
        self.throughRoomSeq = throughRoomSeq
        self.firstChunk = firstChunk
    }
}

/// One batch inside a sync chunk.
public struct SyncItem: Hashable, Sendable {
    /// 0 for snapshot items; the batch's room sequence number for tail items.
    public var roomSeq: UInt64
    public var author: AuthorID
    public var timeMs: UInt64
    public var payload: [UInt8]

    public init(roomSeq: UInt64, author: AuthorID, timeMs: UInt64, payload: [UInt8]) {
        self.roomSeq = roomSeq
        self.author = author
        self.timeMs = timeMs
        self.payload = payload
    }
}

/// A room batch as delivered live.
public struct RoomBatch: Hashable, Sendable {
    public var roomSeq: UInt64
    public var author: AuthorID
    /// Wall-clock milliseconds when the daemon accepted it.
    public var timeMs: UInt64
    public var payload: [UInt8]

    public init(roomSeq: UInt64, author: AuthorID, timeMs: UInt64, payload: [UInt8]) {
        self.roomSeq = roomSeq
        self.author = author
        self.timeMs = timeMs
        self.payload = payload
    }
}

/// Daemon -> device.
public enum ServerMessage: Hashable, Sendable {
    /// The join succeeded; `syncFollows` says a `syncBegin` comes next, else live batches after
    /// `roomHead` follow at once.
    case joinAccepted(member: AuthorID, role: MemberRole, roomHead: UInt64, syncFollows: Bool)
    case joinRefused(JoinRefusal, text: String)
    /// Another member's accepted batch.
    case roomBatch(RoomBatch)
    /// This member's batch `originSeq` (and all earlier ones of its origin that were accepted) is
    /// durable, at `roomSeq` in the room log.
    case batchAck(originSeq: UInt64, roomSeq: UInt64)
    /// Something this session sent was refused; `originSeq` names the batch (0: not a batch).
    case error(SessionErrorCode, originSeq: UInt64, text: String)
    /// A member is present (joined, or its role changed) or gone.
    case member(id: AuthorID, user: String, role: MemberRole, present: Bool)
    case syncBegin(SyncBegin)
    case syncChunk(syncID: UInt32, index: UInt32, items: [SyncItem])
    /// The sync is complete: the board now folds to `digest` at `roomSeq`.
    case syncDone(syncID: UInt32, roomSeq: UInt64, digest: UInt64)
    /// The daemon closes this session.
    case goingAway(GoingAwayReason, text: String)
    /// Chunk `index` of `count` of the `size`-byte blob `hash` (docs/protocol.md 6a).
    case blobChunk(hash: BlobHash, size: UInt32, index: UInt32, count: UInt32, data: [UInt8])
    /// The uploaded blob is stored: an image of `width` x `height` pixels.
    case blobStored(hash: BlobHash, width: UInt32, height: UInt32)
    /// The room has no blob `hash` (a request that names none).
    case blobMissing(hash: BlobHash)
    /// A kind this version does not know (from a newer daemon): skipped.
    case unknown(kind: UInt64)
}
