// The vocabulary of a client session: configuration, events, errors.
import InkCodec
import InkProtocol

/// Who joins which room, and the bounds of the client's queues.
public struct ClientConfiguration: Sendable {
    public var room: String
    public var user: String
    public var role: MemberRole
    /// A signed join token (docs/protocol.md 8.3); empty in open mode.
    public var token: [UInt8]
    /// The device's producer id, the same across reconnects so the daemon deduplicates batches
    /// sent again. Pick it at random once per device.
    public var origin: UInt64
    /// What the first join says it has. `.nothing` brings a compacted snapshot (the board);
    /// `.upTo(roomSeq: 0, digest: 0)` asks for the whole log as a tail, with every batch's
    /// original command times (what `inkwire export` needs) while the daemon still holds it.
    public var initialHave: JoinHave = .nothing
    /// The daemon's static public key (docs/protocol.md 8.4): a daemon that cannot prove it is
    /// refused. Nil: trust on first use, the key is asked of the daemon and reported
    /// (`ClientEvent.serverKeyLearned`) for the app to keep and pin.
    public var serverKey: [UInt8]?
    /// The device's ARQ settings (UDP).
    public var arq = ARQConfiguration()
    /// Key update thresholds of the sealed session.
    public var sealing = SealingConfiguration()
    /// SHA-256, to fetch the background images the board names and check them
    /// (`ClientEvent.background`); nil fetches none.
    public var blobHash: (@Sendable ([UInt8]) -> [UInt8])?
    /// A joined device that sent nothing for this long sends a `ping`, so the daemon does not
    /// take a device that merely watches for one that is gone (docs/protocol.md 5a).
    public var keepalive = SessionKeepalive.interval
    /// Bytes of one `blobPut` part of an upload.
    public static let uploadPartBytes = 32 * 1024

    /// Own batches not yet acknowledged durable; `send` refuses more (`.tooManyPending`).
    public static let maxPendingBatches = RoomFollower.maxPendingBatches
    /// Encoded messages held while the link's queue is full (they keep their order).
    public static let maxHeldMessages = 65_536
    /// Largest message accepted over a stream (the session message bound).
    public static let maxStreamFrameBytes = SessionMessageCodec.maxMessageBytes
    /// The ceiling a device should put on its TCP stream's retransmission timeout, ms (on Linux
    /// 6.15+ the socket option TCP_RTO_MAX_MS), as inkwired does on its side: see protocol.md 8.2.
    /// The ARQ's own probe-timeout ceiling (2 s).
    public static let streamRetransmitCeilingMs = UInt32(ARQConfiguration().maxRTO.microseconds / 1000)

    public init(room: String, user: String, role: MemberRole, token: [UInt8] = [], origin: UInt64, serverKey: [UInt8]? = nil) {
        self.room = room
        self.user = user
        self.role = role
        self.token = token
        self.origin = origin
        self.serverKey = serverKey
    }
}

/// How the session reaches the daemon.
public enum ClientTransport: Hashable, Sendable {
    /// UDP: a sealed ARQ session with this connection id (random per connection, never 0).
    case datagram(connectionID: UInt64)
    /// TCP: sealed session messages, length-prefixed (`StreamFrameDecoder`), no ARQ.
    case stream
}

/// One batch of the room log as this device received it.
public struct DeliveredBatch: Hashable, Sendable {
    /// The batch's room sequence number; 0 for items of a snapshot.
    public var roomSeq: UInt64
    public var author: AuthorID
    /// The commands with the times their author gave them.
    public var commands: [TimedCommand]
    /// Part of a history sync (snapshot or tail) rather than live.
    public var fromSync: Bool

    public init(roomSeq: UInt64, author: AuthorID, commands: [TimedCommand], fromSync: Bool) {
        self.roomSeq = roomSeq
        self.author = author
        self.commands = commands
        self.fromSync = fromSync
    }
}

/// What happened, in order.
public enum ClientEvent: Hashable, Sendable {
    /// The daemon accepted the join (first join or rejoin after `reconnect`).
    case joined(member: AuthorID, role: MemberRole, roomHead: UInt64, syncFollows: Bool)
    case refused(JoinRefusal, text: String)
    /// Another member's batch, in room order (snapshot items first, with `roomSeq` 0).
    case delivered(DeliveredBatch)
    /// Own batches up to `originSeq` are durable; the last of them is at `roomSeq`.
    case acknowledged(originSeq: UInt64, roomSeq: UInt64)
    /// The daemon refused something (`originSeq` names a refused batch, 0 otherwise).
    case error(SessionErrorCode, originSeq: UInt64, text: String)
    case member(id: AuthorID, user: String, role: MemberRole, present: Bool)
    case syncStarted(SyncBegin)
    /// Chunk `chunk` of the sync was applied (and confirmed to the daemon).
    case syncProgress(syncID: UInt32, chunk: UInt32, items: Int)
    /// The sync ended; `matches` says the local board folds to the daemon's digest.
    case syncDone(roomSeq: UInt64, digest: UInt64, matches: Bool)
    /// The daemon ends the session.
    case goingAway(GoingAwayReason, text: String)
    /// Nothing heard from the daemon for the ARQ's dead-peer time (UDP); it keeps probing.
    case unreachable
    case reachable
    /// The transport ended (peer closed, stream ended, protocol failure). `reconnect` resumes.
    case disconnected(reason: String)
    /// The daemon sent something undecodable; it was skipped.
    case protocolError(String)
    /// The handshake completed: the daemon proved it holds `serverKey`; everything is sealed.
    case established
    /// Unpinned: the daemon says its key is this (trust on first use: keep it, and pin it).
    case serverKeyLearned([UInt8])
    /// The daemon at the address answered that it has another key than the pinned one (a
    /// notice, not authenticated: the session keeps trying until the caller gives up). A rogue
    /// daemon, or the daemon's key was replaced.
    case serverKeyMismatch(pinned: [UInt8], presented: [UInt8])
    /// The daemon is too busy for a handshake now (a notice); the session keeps trying.
    case serverBusy
    /// The daemon no longer knows this session (a valid stateless reset: it restarted).
    /// `reconnect` at once; the link is gone.
    case sessionReset
    /// A background image the board names arrived whole and matches its SHA-256.
    case background(hash: BlobHash, bytes: [UInt8])
    case backgroundFailed(hash: BlobHash, reason: String)
    /// An image this device uploaded (`uploadImage`) is stored: name it in a background command.
    case imageStored(hash: BlobHash, width: UInt32, height: UInt32)
}

/// Why `send` refused a batch.
public enum ClientError: Error, Hashable, Sendable {
    /// `ClientConfiguration.maxPendingBatches` batches await acknowledgement.
    case tooManyPending
    /// More than `Batch.maxCommands` commands, or a command the codec cannot encode.
    case unencodable(String)
    /// The session ended (`leave`, `goingAway`, refused join).
    case ended
}
