// The state of one room: its log head, board, tail, users, producers and pending acks.
import InkCodec
import InkProtocol

/// A user the room has seen: keeps its author id (and granted right) across reconnects.
struct RoomUser {
    var author: AuthorID
    var name: String
    /// The teacher's decision (`grantDraw` true, `revokeDraw` false), overriding the role a
    /// non-teacher asks for at join; nil until the teacher decides.
    var drawRight: Bool? = nil
}

/// What the room knows of one producer, for dedupe and acknowledgement (docs/protocol.md 5a,
/// originSeq rules).
struct OriginState {
    /// The producer's newest batch in the log, and where it is.
    var lastOriginSeq: UInt64
    var lastRoomSeq: UInt64
    /// The next `originSeq` expected from its sessions: one past the last taken or refused. Nil
    /// until this relay has seen a batch of it (an origin restored from the log, or new): its
    /// first batch sets it.
    var expected: UInt64?
    /// Numbers below `expected` whose batch the store refused for now (history full, storage
    /// unavailable): the device may send them again, and that is not a reuse. Newest last,
    /// at most `RoomState.maxRetryableNumbers`.
    var retryable: [UInt64] = []
}

/// A batch appended and not yet durable: its author is acknowledged when it is.
struct PendingAck {
    var roomSeq: UInt64
    var origin: UInt64
    var originSeq: UInt64
}

/// A compacted snapshot of the board at `throughRoomSeq`, cut into chunks; shared by every
/// joiner while it is fresh, and what an interrupted snapshot sync resumes into.
struct SnapshotCache {
    var throughRoomSeq: UInt64
    var digest: UInt64
    var chunks: [[SyncItem]]
    var bytes: Int
}

/// A class: the relay mutates one room in place (a struct copied out of the rooms table would
/// copy its board and tail on every write).
final class RoomState {
    let name: String
    /// Joined sessions, in join order (fan-out order).
    var sessions: [SessionID] = []
    /// Users by name, and the name of each author id.
    var users: [String: RoomUser] = [:]
    var nextAuthor: UInt32 = 1
    /// The last room sequence number assigned (0: empty log).
    var head: UInt64 = 0
    /// Everything up to this is durable.
    var durable: UInt64 = 0
    var board = Board()
    /// What a snapshot would drop from the log since the last `snapshotRecord`.
    var garbage = RoomGarbage()
    var tail: RoomTail
    /// Codes each live batch once for every member in the same codec state (the fan-out).
    var liveEncoder = SharedBatchEncoder()
    var origins: [UInt64: OriginState] = [:]
    var pendingAcks: [PendingAck] = []
    var pendingStart = 0
    var snapshot: SnapshotCache?
    /// The board digest at `digestSeq`, computed when a sync needs it.
    var digestCache: (seq: UInt64, digest: UInt64)?
    /// Bridged and not this daemon's to number: local batches are forwarded to the home daemon
    /// and the log grows only by `Relay.handleOrdered` (see RelayBridge.swift).
    var follows = false
    /// Author ids derive from user names (`BridgeAuthorID`), the same on every bridged daemon.
    var nameDerivedAuthors = false
    /// When the relay's sweep first saw the room without a member (nil while it has one).
    var emptySince: Instant?

    init(name: String, limits: RelayLimits) {
        self.name = name
        self.tail = RoomTail(maxEntries: limits.tailBatches, maxBytes: limits.tailBytes)
    }

    var pendingCount: Int { pendingAcks.count - pendingStart }

    /// The digest of the board at the head (cached until the next append).
    func headDigest() -> UInt64 {
        if let c = digestCache, c.seq == head { return c.digest }
        let d = board.digest
        digestCache = (head, d)
        return d
    }

    /// The user record for `name`, created with the next author id; nil past the user bound.
    func user(named name: String, limit: Int) -> RoomUser? {
        if let u = users[name] { return u }
        if nameDerivedAuthors {
            guard users.count < limit else { return nil }
            let taken = Set(users.values.map(\.author))
            let u = RoomUser(author: BridgeAuthorID.forUser(name, avoiding: taken), name: name)
            users[name] = u
            return u
        }
        guard users.count < limit, nextAuthor < UInt32.max else { return nil }
        let u = RoomUser(author: AuthorID(nextAuthor), name: name)
        nextAuthor += 1
        users[name] = u
        return u
    }

    /// Remembers the producer's latest batch; forgets the longest-unseen producer past the bound.
    func noteOrigin(_ origin: UInt64, originSeq: UInt64, roomSeq: UInt64, limit: Int) {
        makeRoom(for: origin, limit: limit)
        var state = origins[origin] ?? OriginState(lastOriginSeq: 0, lastRoomSeq: 0, expected: nil)
        // The newest number stays the largest (a retried batch may land after a later one).
        state.lastOriginSeq = max(state.lastOriginSeq, originSeq)
        state.lastRoomSeq = roomSeq
        state.retryable.removeAll { $0 == originSeq }
        origins[origin] = state
    }

    /// Refused retryable numbers remembered per origin.
    static let maxRetryableNumbers = 64

    /// The store refused `originSeq` for now: the device may send it again.
    func noteRetryable(_ origin: UInt64, originSeq: UInt64) {
        guard origins[origin] != nil, !origins[origin]!.retryable.contains(originSeq) else { return }
        if origins[origin]!.retryable.count == RoomState.maxRetryableNumbers { origins[origin]!.retryable.removeFirst() }
        origins[origin]!.retryable.append(originSeq)
    }

    /// A session of `origin` sent `originSeq` (taken or refused): the next one must follow it.
    func noteProcessed(_ origin: UInt64, originSeq: UInt64, limit: Int) {
        if origins[origin] == nil {
            makeRoom(for: origin, limit: limit)
            origins[origin] = OriginState(lastOriginSeq: 0, lastRoomSeq: 0, expected: nil)
        }
        let next = originSeq &+ 1
        if next > (origins[origin]!.expected ?? 0) { origins[origin]!.expected = next }
    }

    private func makeRoom(for origin: UInt64, limit: Int) {
        if origins[origin] == nil && origins.count >= max(1, limit) {
            // Deterministic: the producer whose last batch is oldest (ties: smallest origin).
            var victim: (UInt64, UInt64)?
            for (o, s) in origins {
                if victim == nil || (s.lastRoomSeq, o) < (victim!.1, victim!.0) { victim = (o, s.lastRoomSeq) }
            }
            if let v = victim { origins[v.0] = nil }
        }
    }

    func pushPendingAck(_ ack: PendingAck, limit: Int) -> PendingAck? {
        pendingAcks.append(ack)
        var dropped: PendingAck?
        if pendingCount > max(1, limit) {
            dropped = pendingAcks[pendingStart]
            pendingStart += 1
        }
        compactPending()
        return dropped
    }

    /// Takes the pending acks up to `roomSeq`, oldest first.
    func takeDurable(upTo roomSeq: UInt64) -> [PendingAck] {
        var out: [PendingAck] = []
        while pendingStart < pendingAcks.count && pendingAcks[pendingStart].roomSeq <= roomSeq {
            out.append(pendingAcks[pendingStart])
            pendingStart += 1
        }
        compactPending()
        return out
    }

    private func compactPending() {
        if pendingStart == pendingAcks.count {
            pendingAcks.removeAll(keepingCapacity: true)
            pendingStart = 0
        } else if pendingStart > 1024 && pendingStart * 2 > pendingAcks.count {
            pendingAcks.removeFirst(pendingStart)
            pendingStart = 0
        }
    }
}
