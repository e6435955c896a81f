// The relay's side of bridging a room across daemons: following rooms forward their local
// batches to the home daemon and grow their log only from its ordered stream.
import InkCodec
import InkProtocol

/// A batch accepted from a local member of a following room, on its way to the room's home
/// daemon (which numbers it), or arrived there. The payload is self-contained.
public struct ForwardedBatch: Hashable, Sendable {
    public var room: String
    /// The device's producer id and its number for this batch (dedupe key, as for sessions).
    public var origin: UInt64
    public var originSeq: UInt64
    /// The author's user name: the author id derives from it on every daemon.
    public var user: String
    public var payload: [UInt8]

    public init(room: String, origin: UInt64, originSeq: UInt64, user: String, payload: [UInt8]) {
        self.room = room
        self.origin = origin
        self.originSeq = originSeq
        self.user = user
        self.payload = payload
    }
}

/// Author ids of bridged rooms: a 32-bit hash of the user name (never 0), so every daemon
/// gives a user the same id without asking the home. Two names of one room colliding take the
/// next free id in the order the daemon meets them (one chance in about 4 000 for a room of
/// 1 024 users; the daemons may then disagree on which of the two gets which).
public enum BridgeAuthorID {
    public static func forUser(_ name: String, avoiding taken: Set<AuthorID> = []) -> AuthorID {
        var h = FNV1a64()
        h.add(Array(name.utf8))
        var id = UInt32(truncatingIfNeeded: h.value ^ (h.value >> 32))
        while id == 0 || taken.contains(AuthorID(id)) { id = id &+ 1 }
        return AuthorID(id)
    }
}

/// Why `handleOrdered` refused a record.
public enum RelayOrderedError: Error, Hashable, Sendable {
    case unknownRoom
    /// The room is numbered here (this daemon is its home).
    case notFollowing
    case outOfOrder(expected: UInt64, got: UInt64)
    case undecodablePayload(roomSeq: UInt64)
}

extension Relay {
    /// A room as this relay creates it: following when bridged (until `setFollows(false)`).
    func newRoom(_ name: String) -> RoomState {
        let room = RoomState(name: name, limits: limits)
        if configuration.bridged {
            room.follows = true
            room.nameDerivedAuthors = true
        }
        return room
    }

    /// Whether `room` forwards its batches (bridged, this daemon not its home).
    public func follows(_ room: String) -> Bool { rooms[room]?.follows ?? false }

    /// Makes the room follow (forward its local batches) or lead (number them here). Creates
    /// the room if there is room for it; false when there is not.
    @discardableResult
    public func setFollows(_ name: String, _ follows: Bool) -> Bool {
        if rooms[name] == nil {
            guard rooms.count < limits.maxRooms else { return false }
            rooms[name] = newRoom(name)
            event(.roomCreated(room: name))
        }
        rooms[name]!.follows = follows
        return true
    }

    /// The next batch a following room accepted from a local member, for the bridge.
    public func pollForward() -> ForwardedBatch? {
        forwards.isEmpty ? nil : forwards.removeFirst()
    }

    func forward(_ batch: ForwardedBatch) {
        // Bounded like the pending acks: the bridge drains this after every input.
        if forwards.count >= limits.maxPendingAcks { forwards.removeFirst() }
        forwards.append(batch)
    }

    /// The home daemon numbered `record` (the next of a following room): fold, keep, store
    /// (`.append`) and fan it out like a local batch. Its author, if a device here, is
    /// acknowledged once it is durable here (`handleDurable`).
    public func handleOrdered(_ record: RelayRecord, now: Instant) throws(RelayOrderedError) {
        guard let room = rooms[record.room] else { throw .unknownRoom }
        guard room.follows else { throw .notFollowing }
        guard record.roomSeq == room.head + 1 else { throw .outOfOrder(expected: room.head + 1, got: record.roomSeq) }
        var fresh = BinaryCodecState()
        guard let decoded = try? BinaryBatchCodec.decode(record.payload, state: &fresh) else {
            throw .undecodablePayload(roomSeq: record.roomSeq)
        }
        let batch = Batch(author: record.author, commands: decoded.commands)
        room.head = record.roomSeq
        room.board.apply(batch)
        room.tail.append(TailEntry(record: record, batch: batch))
        if room.users[record.user] == nil, room.users.count < limits.maxUsersPerRoom {
            room.users[record.user] = RoomUser(author: record.author, name: record.user)
        }
        room.noteOrigin(record.origin, originSeq: record.originSeq, roomSeq: record.roomSeq, limit: limits.maxOriginsPerRoom)
        if let dropped = room.pushPendingAck(PendingAck(roomSeq: record.roomSeq, origin: record.origin, originSeq: record.originSeq),
                                             limit: limits.maxPendingAcks) {
            event(.pendingAckDropped(room: record.room, roomSeq: dropped.roomSeq))
        }
        emit(.append(record))
        event(.batchAccepted(room: record.room, roomSeq: record.roomSeq, bytes: record.payload.count))
        fanOut(room: record.room)
    }

    /// A batch another daemon forwarded to this room's home: numbered here like a local
    /// member's (the forwarding daemon checked its member's rights). Dropped when already in
    /// the log (same `(origin, originSeq)`: the first copy wins), undecodable, or the room
    /// follows. Returns whether it was appended.
    @discardableResult
    public func handleForwarded(_ forwarded: ForwardedBatch, now: Instant) -> Bool {
        if rooms[forwarded.room] == nil { setFollows(forwarded.room, false) }
        guard let room = rooms[forwarded.room], !room.follows else { return false }
        guard forwarded.originSeq > 0, forwarded.payload.count <= limits.maxBatchPayloadBytes else { return false }
        var fresh = BinaryCodecState()
        guard let decoded = try? BinaryBatchCodec.decode(forwarded.payload, state: &fresh) else { return false }
        if let seen = room.origins[forwarded.origin], forwarded.originSeq <= seen.lastOriginSeq {
            // The first copy won. A copy with other commands under the same number is no copy:
            // counted, and dropped like one (gaps are allowed: the forwarder refused those).
            if case .notInLog(.otherContent) = originCheck(room: room, origin: forwarded.origin, originSeq: forwarded.originSeq,
                                                         commands: decoded.commands) {
                event(.forwardConflict(room: forwarded.room, origin: forwarded.origin, originSeq: forwarded.originSeq))
            } else {
                event(.batchDuplicate(room: forwarded.room, origin: forwarded.origin, originSeq: forwarded.originSeq))
            }
            return false
        }
        guard let user = room.user(named: forwarded.user, limit: limits.maxUsersPerRoom) else { return false }
        let batch = Batch(author: user.author, commands: decoded.commands)
        var scratch = BinaryCodecState()
        guard let canonical = try? BinaryBatchCodec.encode(batch, state: &scratch, selfContained: true) else { return false }
        // Storage refused: the forwarder sends it again later.
        if admission?.admit(room: forwarded.room, bytes: canonical.count) != nil { return false }
        accept(batch, canonical: canonical, room: room, user: forwarded.user, origin: forwarded.origin,
               originSeq: forwarded.originSeq, now: now)
        return true
    }
}
