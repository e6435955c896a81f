// The vocabulary of the relay's sans-IO interface: what goes in, what comes out, its bounds.
import InkCodec
import InkProtocol

/// One transport session (an ARQ session over UDP, a framed TCP stream, or a legacy TCP
/// connection), chosen by the daemon. Never reused while the relay knows it.
public struct SessionID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: SessionID, b: SessionID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "session\(rawValue)" }
}

/// How a session reaches its device; the relay treats all alike, metrics tell them apart.
public enum TransportKind: String, Hashable, Sendable {
    case udp
    case tcp
    /// A HYWhiteboard app: the daemon translates its frames to `ClientMessage`s and the relay's
    /// `ServerMessage`s back (see `Relay`, "Legacy members").
    case legacy
    /// A browser: session messages in WebSocket binary messages (docs/protocol.md 8.4).
    case web
}

/// Abuse and memory bounds of a relay; every queue and table the relay keeps is bounded by one.
public struct RelayLimits: Sendable, Equatable {
    /// Rooms held at once; a join that would create one more is refused (`tooManyRooms`).
    public var maxRooms = 256
    /// Sessions joined to one room; a further join is refused (`roomFull`).
    public var maxMembersPerRoom = 200
    /// Distinct user names a room remembers (authors keep their id across reconnects).
    public var maxUsersPerRoom = 1024
    /// Sessions known at once, joined or not; a further session is closed at once.
    public var maxSessions = 4096
    /// Largest batch payload accepted (at most `SessionMessageCodec.maxBatchPayloadBytes`).
    public var maxBatchPayloadBytes = 64 * 1024
    /// Producers `(origin)` whose last `originSeq` a room remembers for dedupe; the one seen
    /// longest ago is forgotten first.
    public var maxOriginsPerRoom = 4096
    /// Batches a live member may fall behind the room head while its transport pushes back;
    /// one more and it is moved to resync (its cursor kept, nothing queued for it).
    public var maxLiveLag: UInt64 = 256
    /// Batches of the room log kept in memory for tail sync and catch-up.
    public var tailBatches = 16_384
    /// Bytes (payloads plus decoded commands) of the in-memory tail.
    public var tailBytes = 32 << 20
    /// Target bytes of one sync chunk (a single larger item goes alone).
    public var syncChunkBytes = 32 * 1024
    /// Sync chunks sent and not yet acknowledged by the member, per member. A device acks a
    /// chunk once it applied it, so every hole in the ARQ stream holds the acks back: this must
    /// cover the bytes a lossy path has in flight for a few round trips (16, 512 KiB, stalled a
    /// 1M-point sync at 5 % loss and 20 ms RTT).
    public var syncChunksInFlight: UInt32 = 32
    /// Commands per snapshot batch (one sync item each).
    public var snapshotCommandsPerBatch = 2048
    /// A cached snapshot older than this many batches is rebuilt for the next joiner.
    public var snapshotMaxAge: UInt64 = 4096
    /// Batches appended but not yet acknowledged durable, per room; past it the oldest pending
    /// acknowledgement is dropped (acks are cumulative per origin, a later one covers it).
    public var maxPendingAcks = 65_536
    /// A session must join within this long of opening.
    public var joinTimeout = Instant.Duration.milliseconds(10_000)
    /// Refused or malformed messages a session may send before it is closed.
    public var maxErrorsPerSession = 64
    /// Largest blob a member may upload, in bytes (the daemon sets its `--max-background-bytes`).
    public var maxBlobBytes = 4 * 1024 * 1024
    /// Bytes of one `blobChunk` (docs/protocol.md 6a).
    public var blobChunkBytes = 16 * 1024
    /// Unacknowledged `blobChunk`s per member: with 16 KiB chunks, at most 128 KiB of a
    /// background is queued ahead of a live stroke on the member's session.
    public var blobChunksInFlight: UInt32 = 8
    /// Bytes of uploads under way, over every session: a part past it is refused (try later),
    /// so sessions that start uploads and stall cannot hold the daemon's memory.
    public var maxUploadBytesHeld = 64 * 1024 * 1024
    /// Blob fetches one member may have waiting; a request past it is refused.
    public var maxBlobFetchesPerMember = 16
    /// Bytes of blobs the relay keeps in memory for members fetching them (one copy shared by
    /// every member of a room fetching the same background), least recently used dropped.
    public var blobCacheBytes = 32 * 1024 * 1024

    public init() {}
}

/// What a relay needs besides its limits.
public struct RelayConfiguration: Sendable {
    public var limits = RelayLimits()
    /// Wall-clock milliseconds (Unix epoch) at `Instant.zero` of the `now` the daemon passes:
    /// accepted batches are stamped `wallClockAtZeroMs + now` for replay.
    public var wallClockAtZeroMs: UInt64 = 0
    /// Rooms are bridged across daemons (`BridgeCore`): every room starts following (its local
    /// batches are forwarded, not numbered) until the bridge makes this daemon its home, and
    /// author ids derive from user names so every daemon gives a user the same one.
    public var bridged = false

    public init(limits: RelayLimits = RelayLimits(), wallClockAtZeroMs: UInt64 = 0, bridged: Bool = false) {
        self.limits = limits
        self.wallClockAtZeroMs = wallClockAtZeroMs
        self.bridged = bridged
    }
}

/// Verified claims of a join token (the daemon checks the HMAC and the expiry).
public struct TokenClaims: Hashable, Sendable {
    public var room: String
    public var user: String
    /// The most rights the token allows; a join may ask for this role or fewer rights.
    public var role: MemberRole
    /// Unix milliseconds after which the token is refused (the daemon checks it).
    public var expiresAtMs: UInt64

    public init(room: String, user: String, role: MemberRole, expiresAtMs: UInt64) {
        self.room = room
        self.user = user
        self.role = role
        self.expiresAtMs = expiresAtMs
    }
}

/// The daemon's verdict on a join's token.
public enum JoinAuthorization: Hashable, Sendable {
    /// No secret configured (LAN default): the requested role is granted.
    case open
    /// The token is valid; the relay checks room, user and role against it.
    case verified(TokenClaims)
    /// The token is missing, bad or expired.
    case refused(JoinRefusal, text: String)
}

/// Checks join tokens; called synchronously for every join. The daemon implements it with
/// HMAC-SHA256 and its wall clock; tests and open mode use `OpenAuthorizer`.
public protocol JoinAuthorizer {
    func authorize(_ request: JoinRequest, now: Instant) -> JoinAuthorization
    /// Whether joins need a token (a secret is set): only then does `RelayQuotas.memberReserve`
    /// hold slots back, since only a token can prove a teacher or presenter.
    var requiresTokens: Bool { get }
}

extension JoinAuthorizer {
    public var requiresTokens: Bool { false }
}

/// Open mode: every join is allowed the role it asks for.
public struct OpenAuthorizer: JoinAuthorizer, Sendable {
    public init() {}
    public func authorize(_ request: JoinRequest, now: Instant) -> JoinAuthorization { .open }
}

/// One accepted batch, as the store keeps it and restores it.
public struct RelayRecord: Hashable, Sendable {
    public var room: String
    public var roomSeq: UInt64
    public var author: AuthorID
    /// The author's user name (reconnects with the same name are the same author).
    public var user: String
    public var origin: UInt64
    public var originSeq: UInt64
    /// Wall-clock milliseconds when the relay accepted it.
    public var timeMs: UInt64
    /// The batch in the compact binary codec, self-contained (decodes with a fresh state).
    public var payload: [UInt8]

    public init(room: String, roomSeq: UInt64, author: AuthorID, user: String, origin: UInt64, originSeq: UInt64, timeMs: UInt64, payload: [UInt8]) {
        self.room = room
        self.roomSeq = roomSeq
        self.author = author
        self.user = user
        self.origin = origin
        self.originSeq = originSeq
        self.timeMs = timeMs
        self.payload = payload
    }

    /// `author` and `user` in one string, for stores that keep one author column:
    /// `"<author id>:<user>"`.
    public var authorLabel: String { "\(author.rawValue):\(user)" }

    /// The inverse of `authorLabel`; nil when `label` is not one.
    public static func parseAuthorLabel(_ label: String) -> (author: AuthorID, user: String)? {
        guard let colon = label.firstIndex(of: ":"), let id = UInt32(label[..<colon]) else { return nil }
        return (AuthorID(id), String(label[label.index(after: colon)...]))
    }
}

/// Something worth counting or logging; never needed for correctness.
public enum RelayEvent: Hashable, Sendable {
    case sessionOpened(SessionID, TransportKind)
    case sessionClosed(SessionID)
    case roomCreated(room: String)
    case memberJoined(room: String, session: SessionID, user: String, role: MemberRole)
    case joinRefused(session: SessionID, JoinRefusal)
    case memberLeft(room: String, session: SessionID)
    case batchAccepted(room: String, roomSeq: UInt64, bytes: Int)
    case batchDuplicate(room: String, origin: UInt64, originSeq: UInt64)
    /// A forwarded batch reused a number already in the log with other commands: dropped.
    case forwardConflict(room: String, origin: UInt64, originSeq: UInt64)
    /// A token reached its expiry, or no longer verified after the daemon's secret changed.
    case tokenEnded(session: SessionID, expired: Bool)
    case batchRefused(session: SessionID, SessionErrorCode)
    case malformedMessage(SessionID, SessionMessageError)
    /// The member fell more than `maxLiveLag` behind: it will be brought up to date by sync.
    case memberResync(room: String, session: SessionID, cursor: UInt64)
    case syncStarted(room: String, session: SessionID, mode: SyncMode, afterRoomSeq: UInt64, throughRoomSeq: UInt64)
    case syncCompleted(room: String, session: SessionID, roomSeq: UInt64, chunks: UInt32, bytes: Int)
    case snapshotBuilt(room: String, throughRoomSeq: UInt64, items: Int, bytes: Int)
    /// The store is behind by `maxPendingAcks`: the oldest pending ack was dropped.
    case pendingAckDropped(room: String, roomSeq: UInt64)
    /// An uploaded image was checked and stored.
    case blobStored(room: String, hash: BlobHash, bytes: Int)
    case blobRefused(room: String, session: SessionID, text: String)
    /// Every chunk of a blob reached the member.
    case blobSent(room: String, session: SessionID, bytes: Int)
    /// A join was refused by `quota`; `offender` names who reached it ("user ana", "address
    /// 10.0.0.7"), for a log line per offender and minute.
    case quotaRefused(session: SessionID, room: String, quota: RelayQuota, offender: String)
    /// An idle member was closed (`goingAway(evicted)`) to make way: for a newer session of its
    /// user (`sessionsPerUser`) or a teacher or presenter in a full room (`memberReserve`).
    case memberEvicted(room: String, session: SessionID, user: String, quota: RelayQuota)
    /// A member sent nothing for `RelayQuotas.memberTimeout` and was closed.
    case memberTimedOut(room: String, session: SessionID, user: String)
    /// An empty room without history left memory (`RelayQuotas.emptyRoomExpiry`).
    case roomReleased(room: String)
}

/// What a legacy session (`TransportKind.legacy`) gets instead of encoded messages: the board,
/// then every batch of the room in room order as model commands (no binary codec on the way).
public enum LegacyDelivery: Hashable, Sendable {
    /// The join was accepted: the member's author id and role, and the board through `roomSeq`.
    case joined(author: AuthorID, role: MemberRole, board: Board, roomSeq: UInt64)
    /// A batch of the room; `own` when it is the member's (a legacy app needs its own in room
    /// order too: another author's clear may land between its batches).
    case batch(roomSeq: UInt64, author: AuthorID, commands: [TimedCommand], own: Bool)
}

/// What the caller must do, in the order given.
public enum RelayOutput: Hashable, Sendable {
    /// Send `message` on `session` (encode with `SessionMessageCodec.encode`, or translate for a
    /// legacy session).
    case send(SessionID, ServerMessage)
    /// Hand `delivery` to the legacy session `session` (see `Relay`, "Legacy members").
    case legacy(SessionID, LegacyDelivery)
    /// Append `record` to the room's durable log, then report it with `handleDurable`.
    case append(RelayRecord)
    /// Close `session` after sending what was queued for it (a `goingAway` precedes this). The
    /// relay has already forgotten it.
    case close(SessionID, GoingAwayReason)
    case event(RelayEvent)
}

/// Why `restore` refused a record.
public enum RelayRestoreError: Error, Hashable, Sendable {
    /// Records of a room must come in order, `roomSeq` one more than the previous.
    case outOfOrder(expected: UInt64, got: UInt64)
    case undecodablePayload(roomSeq: UInt64)
    case tooManyRooms
    /// A snapshot record that does not decode (the named part).
    case malformedSnapshot(String)
    /// A snapshot's batches do not fold to its digest.
    case digestMismatch(roomSeq: UInt64)
}
