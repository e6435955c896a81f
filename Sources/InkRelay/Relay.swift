// The relay: rooms, members, permissions, the room log and its fan-out. Sans-IO.
import InkCodec
import InkProtocol

/// Every room of a daemon, driven by the daemon's IO and clock (quinn style: inputs are
/// `handle…`, outputs are pulled with `poll…`; the relay never reads a clock or a socket).
///
/// ## Call order (the daemon)
/// 1. At start, for every room in the store, `restore(_:)` each record in `roomSeq` order.
/// 2. `handleSessionOpened(id, transport:source:now:)` when a device connects (a new ARQ
///    session, TCP stream or legacy connection), with its address for the per-address quotas.
/// 3. `handleMessage(bytes, from:now:)` for every message the session delivers, in order
///    (or `handle(_:from:now:)` with a message already decoded or translated, for legacy).
///    Joins are checked with the `JoinAuthorizer` given at `init`, synchronously.
/// 4. `handleBackpressure(id, now:)` when the session's send queue passes its high-water mark
///    (well before its transport refuses a message: whatever the relay sends must be sent), and
///    `handleReady(id, now:)` when it drains below its low-water mark.
/// 5. `handleDurable(room:upTo:now:)` when the store has made the room's log durable up to
///    a room sequence number (after `.append` outputs; group commit may cover many).
/// 6. `handleSessionClosed(id, now:)` when the transport ends (peer gone, timeout).
/// 7. `handleTimeout(now:)` when `pollTimeout()` passes (early or twice is harmless).
/// 8. `handleSessionConfirmed(id, now:)` when a sealed session's device proved it holds the
///    keys (sessions opened `confirmed: false`): a join replaces another session of the same
///    device only once its own session is confirmed, and an unconfirmed session is closed at
///    the join timeout (a replayed handshake never confirms).
/// 9. `handleAuthorizationChanged(now:)` when the authorizer's secret changed (SIGHUP).
/// 10. `updateQuotas(_:now:)` and `updateRoomBounds(maxRooms:maxMembersPerRoom:)` when the
///    settings changed (SIGHUP); members already in are kept.
/// After every input: drain `pollOutput()` until nil, acting on each output in order, then
/// re-arm the timer from `pollTimeout()`. `handleShutdown(now:)` says goodbye to everyone.
///
/// ## Rooms and roles
/// A room is created by its first join. The teacher owns it: draws, may draw while the board
/// is locked, sends room commands (lock, present page), and grants or revokes the right to
/// draw (`grantDraw`/`revokeDraw` by user name; the decision outlives reconnects). A presenter
/// draws; a viewer watches. A batch from a member without the right is refused with an
/// `error` to that member and nothing else happens. A user name is one author in the room:
/// a reconnect (or a second device) with the same name draws as the same author, so its undo
/// reaches its earlier strokes.
///
/// ## The log and fan-out
/// Each accepted batch gets the next `roomSeq` and its author, is folded into the room's
/// `Board`, appended to the in-memory tail, handed to the store (`.append`), and sent to every
/// other member in join order, encoded against that member's own codec state (coded once for
/// all members whose states agree on it: `SharedBatchEncoder`). Batches are
/// deduplicated by `(origin, originSeq)`: a batch sent again is not appended twice, and is
/// acknowledged when durable. The author gets `batchAck` only once the store reports the batch
/// durable. Each member has a cursor (the last `roomSeq` it was sent or does not need: its own
/// origin's batches are never sent back to it). A member whose transport pushes back simply
/// stops advancing; past `maxLiveLag` it is marked for resync, and when its transport is ready
/// a sync from its cursor (tail, or snapshot when the tail no longer reaches back) brings it
/// to the head, after which it is live again. Since every delivery is cursor-driven over one
/// log there is no gap and no duplicate, and a slow member holds back no one.
///
/// ## History sync
/// A joiner says what it has (`JoinHave`). Nothing: a compacted snapshot of the board
/// (`Board.snapshotBatches`, cached per room and shared by joiners), then the tail. A last
/// `roomSeq` the in-memory tail still reaches: just the tail. A partial snapshot the room
/// still caches: the rest of it. Chunks are bounded (`syncChunkBytes`), at most
/// `syncChunksInFlight` unacknowledged (`syncAck`), and every sync ends with `syncDone` and the
/// board digest. Sync items are self-contained codec batches (decode each with a fresh state;
/// they do not touch the live `roomBatch` codec state). Older history (before the in-memory
/// tail) is served by a snapshot today; a store-backed tail can slot in where the tail sync
/// finds an entry missing.
///
/// ## Admission (RelayAdmission.swift)
/// `RelayQuotas` bound what one user, one address and idle members may hold: sessions per user
/// and per address in a room, legacy connections per address, a reserve of a room's members
/// for teacher and presenter tokens (in a full room an idle viewer of the same user, else an
/// idle member without a token, makes way), members that say nothing closed after a timeout,
/// rooms created per address per minute when rooms are open, and empty rooms released so their
/// slots come back.
///
/// ## Legacy members
/// A HYWhiteboard app is a member like any other (`TransportKind.legacy`): the daemon turns
/// its frames into `join`/`batch` messages with `LegacyTranslator` (its own codec state
/// encodes them) and the relay's messages back into legacy text. It sees every other member's
/// strokes, snapshot included. Its undo and redo name no stroke: the translator maps them to
/// the app's own last drawn or last undone line, so a legacy user can undo only its own lines
/// in order, never a single older line, and can never erase one stroke, change page or lock.
/// Shown undos of other authors are expressible only when they hit the line on top of the
/// app's single "other side" stack; otherwise the daemon must redraw the page.
public final class Relay {
    public internal(set) var configuration: RelayConfiguration
    var limits: RelayLimits { configuration.limits }
    /// Admission quotas (`updateQuotas`); all off until set.
    public internal(set) var quotas = RelayQuotas()
    /// Per source address, when its next room creation is due (`roomsPerAddressPerMinute`).
    var roomCreations: [SourceHost: Instant] = [:]
    /// When `handleTimeout` next looks for silent members and empty rooms (quotas on).
    var nextSweep: Instant?
    let authorizer: any JoinAuthorizer
    /// Asked before a batch is numbered (the daemon's storage limits); nil admits all.
    public weak var admission: (any BatchAdmission)?
    /// The daemon's blob store and image checks; nil refuses every upload and fetch.
    public weak var blobs: (any RoomBlobs)?
    /// Blobs members are fetching, least recently used first (`RelayLimits.blobCacheBytes`).
    var blobCache: [(key: BlobKey, bytes: [UInt8])] = []
    /// Bytes held by the members' uploads under way (`RelayLimits.maxUploadBytesHeld`).
    var uploadBytesHeld = 0

    var rooms: [String: RoomState] = [:]
    var sessions: [SessionID: SessionState] = [:]
    /// Sessions not yet joined and confirmed, and when they must be (only these have a timer).
    var joinDeadlines: [SessionID: Instant] = [:]
    /// Members with a token, and when it expires.
    var tokenExpiries: [SessionID: Instant] = [:]
    private var outputs: [RelayOutput] = []
    private var outputStart = 0
    /// Batches of following rooms waiting for the bridge (`pollForward`).
    var forwards: [ForwardedBatch] = []

    public init(configuration: RelayConfiguration = RelayConfiguration(), authorizer: any JoinAuthorizer = OpenAuthorizer()) {
        self.configuration = configuration
        self.authorizer = authorizer
    }

    // MARK: outputs

    /// The next thing to do, or nil when there is nothing.
    public func pollOutput() -> RelayOutput? {
        guard outputStart < outputs.count else { return nil }
        let o = outputs[outputStart]
        outputStart += 1
        if outputStart == outputs.count {
            outputs.removeAll(keepingCapacity: true)
            outputStart = 0
        }
        return o
    }

    /// The earliest instant `handleTimeout` has work (a session that must have joined by then,
    /// a token that expires then).
    public func pollTimeout() -> Instant? {
        var earliest: Instant?
        for d in joinDeadlines.values where earliest == nil || d < earliest! { earliest = d }
        for d in tokenExpiries.values where earliest == nil || d < earliest! { earliest = d }
        if let d = nextSweep, earliest == nil || d < earliest! { earliest = d }
        return earliest
    }

    func emit(_ o: RelayOutput) { outputs.append(o) }
    func send(_ session: SessionID, _ m: ServerMessage) { outputs.append(.send(session, m)) }
    func event(_ e: RelayEvent) { outputs.append(.event(e)) }

    func wallMs(_ now: Instant) -> UInt64 { configuration.wallClockAtZeroMs &+ now.microseconds / 1000 }

    // MARK: reading

    /// Names of the rooms held, sorted.
    public var roomNames: [String] { rooms.keys.sorted() }
    public func roomHead(_ room: String) -> UInt64? { rooms[room]?.head }
    public func durableRoomSeq(_ room: String) -> UInt64? { rooms[room]?.durable }
    public func board(_ room: String) -> Board? { rooms[room]?.board }
    /// The member joined on `session`: its room, author id and role.
    public func member(_ session: SessionID) -> (room: String, author: AuthorID, role: MemberRole)? {
        guard let m = sessions[session]?.member else { return nil }
        return (m.room, m.author, m.role)
    }
    /// The user name the member on `session` joined with.
    public func memberUser(_ session: SessionID) -> String? { sessions[session]?.member?.user }
    /// Sessions joined to `room`, in join order.
    public func sessions(in room: String) -> [SessionID] { rooms[room]?.sessions ?? [] }
    /// The last room sequence number `session` was sent (or skipped as its own).
    public func cursor(_ session: SessionID) -> UInt64? { sessions[session]?.member?.cursor }
    /// Whether `session` is receiving live batches (not resyncing or syncing).
    public func isLive(_ session: SessionID) -> Bool {
        if case .live = sessions[session]?.member?.mode { return true }
        return false
    }

    // MARK: inputs

    public func handleSessionOpened(_ session: SessionID, transport: TransportKind, confirmed: Bool = true, source: SourceHost? = nil,
                                    now: Instant) {
        guard sessions[session] == nil else { return }
        guard sessions.count < limits.maxSessions else {
            send(session, .goingAway(.other, text: "too many sessions"))
            emit(.close(session, .other))
            return
        }
        sessions[session] = SessionState(id: session, transport: transport, confirmed: confirmed, source: source,
                                         lastHeard: now, lastActed: now)
        joinDeadlines[session] = now + limits.joinTimeout
        scheduleSweep(now: now)
        event(.sessionOpened(session, transport))
    }

    /// One message as the session delivered it. Malformed bytes get an error on this session
    /// only.
    public func handleMessage(_ bytes: [UInt8], from session: SessionID, now: Instant) {
        guard sessions[session] != nil else { return }
        let message: ClientMessage
        do {
            message = try SessionMessageCodec.decodeClient(bytes)
        } catch {
            event(.malformedMessage(session, error))
            refuse(session, .malformedMessage, originSeq: 0, text: "malformed message: \(error)")
            return
        }
        handle(message, from: session, now: now)
    }

    /// One decoded (or translated) message of the session.
    public func handle(_ message: ClientMessage, from session: SessionID, now: Instant) {
        guard sessions[session] != nil else { return }
        sessions[session]!.lastHeard = now
        switch message {
        case .batch, .grantDraw, .revokeDraw, .blobPut: sessions[session]!.lastActed = now
        default: break
        }
        switch message {
        case .join(let request): handleJoin(request, from: session, now: now)
        case .batch(let originSeq, let payload): handleBatch(originSeq: originSeq, payload: payload, from: session, now: now)
        case .grantDraw(let user): handleDrawRight(user: user, allowed: true, from: session)
        case .revokeDraw(let user): handleDrawRight(user: user, allowed: false, from: session)
        case .syncAck(let id, let chunk): handleSyncAck(syncID: id, chunk: chunk, from: session)
        case .blobPut(let hash, let size, let offset, let data):
            handleBlobPut(hash: hash, size: size, offset: offset, data: data, from: session, now: now)
        case .blobRequest(let hash, let first): handleBlobRequest(hash: hash, firstChunk: first, from: session)
        case .blobAck(let hash, let chunk): handleBlobAck(hash: hash, chunk: chunk, from: session)
        case .leave: closeSession(session, .left, text: "left")
        case .ping, .unknown: break
        }
    }

    public func handleSessionClosed(_ session: SessionID, now: Instant) {
        guard sessions[session] != nil else { return }
        removeSession(session)
    }

    /// The device of `session` proved it holds the session's keys: its join (now or later) may
    /// replace an older session of the same device.
    public func handleSessionConfirmed(_ session: SessionID, now: Instant) {
        guard sessions[session] != nil, !sessions[session]!.confirmed else { return }
        sessions[session]!.confirmed = true
        if let held = sessions[session]!.heldJoin {
            // Its join needed someone to make way: decided now that the device proved itself.
            sessions[session]!.heldJoin = nil
            handleJoin(held, from: session, now: now)
            return
        }
        guard let m = sessions[session]!.member else { return }
        joinDeadlines[session] = nil
        replaceOlderSessions(of: m.origin, in: m.room, keeping: session)
    }

    /// Closes the other sessions of `origin` in `room` (the device reconnected).
    func replaceOlderSessions(of origin: UInt64, in name: String, keeping session: SessionID) {
        guard let room = rooms[name] else { return }
        for old in room.sessions where old != session && sessions[old]?.member?.origin == origin {
            closeSession(old, .replaced, text: "replaced by a new session of this device")
        }
    }

    /// The authorizer's secret changed: every joined member's token is checked again; one that
    /// no longer passes ends its session (`tokenRevoked`). Legacy members carry no token.
    public func handleAuthorizationChanged(now: Instant) {
        for s in sessions.keys.sorted() {
            guard let state = sessions[s], state.transport != .legacy, let m = state.member, let request = m.request else { continue }
            switch authorizer.authorize(request, now: now) {
            case .open:
                tokenExpiries[s] = nil
            case .verified(let claims) where claims.room == request.room && claims.user == request.user && request.role >= claims.role:
                noteTokenExpiry(s, claims: claims, now: now)
            case .verified:
                event(.tokenEnded(session: s, expired: false))
                closeSession(s, .tokenRevoked, text: "the daemon's token secret changed: the token is for another room, user or role")
            case .refused(_, let text):
                event(.tokenEnded(session: s, expired: false))
                closeSession(s, .tokenRevoked, text: "the daemon's token secret changed: \(text)")
            }
        }
    }

    func noteTokenExpiry(_ session: SessionID, claims: TokenClaims, now: Instant) {
        let wallNow = wallMs(now)
        let left = claims.expiresAtMs > wallNow ? claims.expiresAtMs - wallNow : 0
        tokenExpiries[session] = now + .milliseconds(left)
    }

    /// The transport's send queue of `session` is full: send it nothing more until `handleReady`.
    public func handleBackpressure(_ session: SessionID, now: Instant) {
        sessions[session]?.member?.blocked = true
    }

    /// The transport of `session` can take more: catch it up.
    public func handleReady(_ session: SessionID, now: Instant) {
        guard sessions[session]?.member != nil else { return }
        sessions[session]!.member!.blocked = false
        pump(session)
        if let m = sessions[session]?.member { pumpBlobs(session, m) }
    }

    /// The store made `room`'s log durable up to `roomSeq`: acknowledge the batches it covers.
    public func handleDurable(room name: String, upTo roomSeq: UInt64, now: Instant) {
        guard let room = rooms[name] else { return }
        let target = min(roomSeq, room.head)
        guard target > room.durable else { return }
        room.durable = target
        let acks = room.takeDurable(upTo: target)
        // One ack per batch, in room order, so a device learns where each of its batches landed
        // (it folds them there); an ack also covers earlier batches of its origin.
        for a in acks {
            // To the device's confirmed session: an unconfirmed one may be a replayed handshake.
            guard let s = room.sessions.first(where: { sessions[$0]?.member?.origin == a.origin && sessions[$0]?.confirmed == true }) else { continue }
            send(s, .batchAck(originSeq: a.originSeq, roomSeq: a.roomSeq))
        }
    }

    /// Closes sessions that did not join (or were not confirmed) in time, and those whose token
    /// expired.
    public func handleTimeout(now: Instant) {
        let late = joinDeadlines.filter { $0.value <= now }.map(\.key).sorted()
        for s in late { closeSession(s, .idle, text: "no join within \(limits.joinTimeout.microseconds / 1000) ms") }
        let expired = tokenExpiries.filter { $0.value <= now }.map(\.key).sorted()
        for s in expired {
            event(.tokenEnded(session: s, expired: true))
            closeSession(s, .tokenExpired, text: "the join token expired; join again with a new token")
        }
        if let due = nextSweep, due <= now {
            nextSweep = nil
            sweepQuotas(now: now)
            scheduleSweep(now: now)
        }
    }

    /// Says goodbye to every session (daemon stopping).
    public func handleShutdown(now: Instant) {
        for s in sessions.keys.sorted() { closeSession(s, .shuttingDown, text: "daemon shutting down") }
    }

    // MARK: helpers shared by the extensions

    /// An error to one session; too many and the session is closed.
    func refuse(_ session: SessionID, _ code: SessionErrorCode, originSeq: UInt64, text: String) {
        guard sessions[session] != nil else { return }
        send(session, .error(code, originSeq: originSeq, text: text))
        sessions[session]!.errors += 1
        if sessions[session]!.errors > limits.maxErrorsPerSession {
            closeSession(session, .tooManyErrors, text: "too many errors")
        }
    }

    func closeSession(_ session: SessionID, _ reason: GoingAwayReason, text: String) {
        guard sessions[session] != nil else { return }
        send(session, .goingAway(reason, text: text))
        removeSession(session)
        emit(.close(session, reason))
    }

    /// Forgets a session; tells the room when the user's last session left.
    func removeSession(_ session: SessionID) {
        guard let state = sessions.removeValue(forKey: session) else { return }
        joinDeadlines[session] = nil
        tokenExpiries[session] = nil
        event(.sessionClosed(session))
        guard let m = state.member, let room = rooms[m.room] else { return }
        if let upload = m.upload { uploadBytesHeld -= upload.bytes.count }
        room.sessions.removeAll { $0 == session }
        event(.memberLeft(room: m.room, session: session))
        let stillThere = room.sessions.contains { sessions[$0]?.member?.user == m.user }
        if !stillThere {
            for other in room.sessions {
                send(other, .member(id: m.author, user: m.user, role: m.role, present: false))
            }
        }
    }
}
