// The relay's view of one session: joined or not, and how far its device is in the room log.
import InkCodec
import InkProtocol

/// How a joined member is being brought the room log.
enum DeliveryMode {
    /// Each new batch is sent as a `roomBatch` as it is accepted.
    case live
    /// Fell more than `maxLiveLag` behind while its transport pushed back: nothing is sent
    /// until the transport is ready, then a sync from `cursor` starts.
    case resync
    case syncing(SyncProgress)
}

/// One sync in progress: chunks of a snapshot (shared, precomputed) or of the tail (packed
/// from the room's tail as they are sent).
struct SyncProgress {
    var id: UInt32
    var mode: SyncMode
    /// Tail: batches after this are sent. Snapshot: the snapshot's room sequence number.
    var after: UInt64
    /// The sync ends with the board at this room sequence number.
    var through: UInt64
    var digest: UInt64
    /// Snapshot mode: the chunks to send.
    var snapshotChunks: [[SyncItem]] = []
    /// The next chunk index to send.
    var nextChunk: UInt32
    /// Chunks acknowledged: every index below this one.
    var ackedBelow: UInt32
    /// Tail mode: the next room sequence number to pack.
    var tailNext: UInt64
    var bytesSent = 0
    var chunksSent: UInt32 = 0
}

struct SessionState {
    let id: SessionID
    let transport: TransportKind
    /// The device proved it holds the session's keys (docs/protocol.md 8.1): only then may its
    /// join replace another session of the same device. Sessions without a handshake (legacy,
    /// tests) are confirmed from the start.
    var confirmed: Bool
    var errors = 0
    var member: MemberState?
    /// The device's address for the per-address quotas (nil: not counted).
    var source: SourceHost?
    /// A join that needs others to make way, waiting for this session to be confirmed.
    var heldJoin: JoinRequest?
    /// When the device last sent any message (`RelayQuotas.memberTimeout`).
    var lastHeard: Instant
    /// When the member joined or last drew, uploaded or sent a room command (idle after
    /// `RelayQuotas.idleAfter`).
    var lastActed: Instant
}

/// A class, mutated in place through the sessions table.
final class MemberState {
    let room: String
    let user: String
    let author: AuthorID
    var role: MemberRole
    let origin: UInt64
    /// The last room sequence number this member has been sent or needs no more (its own).
    var cursor: UInt64
    /// The transport said it is full (`handleBackpressure`) and not yet ready again.
    var blocked = false
    var mode: DeliveryMode = .live
    var nextSyncID: UInt32 = 1
    /// Codec state of the daemon -> device direction for `roomBatch` payloads.
    var outbound = BinaryCodecState()
    /// A legacy app: it gets `LegacyDelivery`s (the board, then every batch, its own too).
    var isLegacy = false
    /// Its join carried a token the daemon verified (legacy apps and open rooms carry none).
    var authenticated = false
    /// Codec state of the device -> daemon direction for `batch` payloads.
    var inbound = BinaryCodecState()

    /// The join as the device sent it (its token is checked again when the daemon's secret
    /// changes).
    var request: JoinRequest?
    /// The blob this member uploads, parts so far.
    var upload: BlobUpload?
    /// Blobs this member asked for, the one being sent first.
    var fetches: [BlobFetch] = []

    init(room: String, user: String, author: AuthorID, role: MemberRole, origin: UInt64, cursor: UInt64) {
        self.room = room
        self.user = user
        self.author = author
        self.role = role
        self.origin = origin
        self.cursor = cursor
    }
}
