// A compacted room as the store keeps it: the board as snapshot batches plus the relay's
// tables (authors, draw rights, producers), so a restart after compaction loses nothing the
// relay needs.
import InkCodec
import InkProtocol

/// A room compacted at `throughRoomSeq`. The daemon stores `encode()` as the room's snapshot
/// (then may drop the records it covers) and at start calls `Relay.restore(snapshot:)` before
/// `restore(_:)` of the records after it.
///
///     version:u8 room:string throughRoomSeq:varint digest:u64
///     userCount:varint  (name:string author:varint drawRight:u8 (0 undecided, 1 revoked, 2 granted))*
///     originCount:varint (origin:varint lastOriginSeq:varint lastRoomSeq:varint)*
///     batchCount:varint (payload:bytes)*          self-contained compact binary batches
public struct RoomSnapshotRecord: Hashable, Sendable {
    public static let version: UInt8 = 1
    /// Largest encoded record decoded.
    public static let maxBytes = 1 << 30
    /// Most users, producers or batches one record holds.
    public static let maxEntries = 1 << 22

    public struct User: Hashable, Sendable {
        public var name: String
        public var author: AuthorID
        public var drawRight: Bool?
        public init(name: String, author: AuthorID, drawRight: Bool?) {
            self.name = name
            self.author = author
            self.drawRight = drawRight
        }
    }

    public struct Origin: Hashable, Sendable {
        public var origin: UInt64
        public var lastOriginSeq: UInt64
        public var lastRoomSeq: UInt64
        public init(origin: UInt64, lastOriginSeq: UInt64, lastRoomSeq: UInt64) {
            self.origin = origin
            self.lastOriginSeq = lastOriginSeq
            self.lastRoomSeq = lastRoomSeq
        }
    }

    public var room: String
    public var throughRoomSeq: UInt64
    /// `Board.digest` of the board the batches fold to.
    public var digest: UInt64
    /// Sorted by name.
    public var users: [User]
    /// Sorted by origin.
    public var origins: [Origin]
    public var batches: [[UInt8]]

    public init(room: String, throughRoomSeq: UInt64, digest: UInt64, users: [User], origins: [Origin], batches: [[UInt8]]) {
        self.room = room
        self.throughRoomSeq = throughRoomSeq
        self.digest = digest
        self.users = users
        self.origins = origins
        self.batches = batches
    }

    public func encode() -> [UInt8] {
        var w = RecordWriter()
        w.bytes.reserveCapacity(64 + batches.reduce(0) { $0 + $1.count + 4 })
        w.bytes.append(RoomSnapshotRecord.version)
        w.string(room)
        w.varint(throughRoomSeq)
        for shift in stride(from: 56, through: 0, by: -8) { w.bytes.append(UInt8(truncatingIfNeeded: digest >> UInt64(shift))) }
        w.varint(UInt64(users.count))
        for u in users {
            w.string(u.name)
            w.varint(UInt64(u.author.rawValue))
            w.bytes.append(u.drawRight == nil ? 0 : (u.drawRight! ? 2 : 1))
        }
        w.varint(UInt64(origins.count))
        for o in origins {
            w.varint(o.origin)
            w.varint(o.lastOriginSeq)
            w.varint(o.lastRoomSeq)
        }
        w.varint(UInt64(batches.count))
        for b in batches {
            w.varint(UInt64(b.count))
            w.bytes.append(contentsOf: b)
        }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(RelayRestoreError) -> RoomSnapshotRecord {
        guard bytes.count <= maxBytes else { throw .malformedSnapshot("too large") }
        var r = RecordReader(bytes: bytes)
        guard try r.u8() == version else { throw .malformedSnapshot("version") }
        let room = try r.string()
        let through = try r.varint()
        var digest: UInt64 = 0
        for _ in 0..<8 { digest = digest << 8 | UInt64(try r.u8()) }
        var users: [User] = []
        for _ in 0..<(try r.count()) {
            let name = try r.string()
            let author = try r.varint()
            guard author <= UInt64(UInt32.max) else { throw .malformedSnapshot("author") }
            let right: Bool?
            switch try r.u8() {
            case 0: right = nil
            case 1: right = false
            case 2: right = true
            default: throw .malformedSnapshot("drawRight")
            }
            users.append(User(name: name, author: AuthorID(UInt32(author)), drawRight: right))
        }
        var origins: [Origin] = []
        for _ in 0..<(try r.count()) {
            origins.append(Origin(origin: try r.varint(), lastOriginSeq: try r.varint(), lastRoomSeq: try r.varint()))
        }
        var batches: [[UInt8]] = []
        for _ in 0..<(try r.count()) { batches.append(try r.lengthPrefixed()) }
        guard r.index == bytes.count else { throw .malformedSnapshot("trailing bytes") }
        return RoomSnapshotRecord(room: room, throughRoomSeq: through, digest: digest, users: users, origins: origins, batches: batches)
    }
}

private struct RecordWriter {
    var bytes: [UInt8] = []
    mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }
    mutating func string(_ s: String) {
        varint(UInt64(s.utf8.count))
        bytes.append(contentsOf: s.utf8)
    }
}

private struct RecordReader {
    let bytes: [UInt8]
    var index = 0

    mutating func u8() throws(RelayRestoreError) -> UInt8 {
        guard index < bytes.count else { throw .malformedSnapshot("truncated") }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func varint() throws(RelayRestoreError) -> UInt64 {
        var result: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 7) {
            let b = try u8()
            if shift == 63 && b > 1 { throw .malformedSnapshot("varint") }
            result |= UInt64(b & 0x7F) << UInt64(shift)
            if b & 0x80 == 0 { return result }
        }
        throw .malformedSnapshot("varint")
    }

    mutating func count() throws(RelayRestoreError) -> Int {
        let n = try varint()
        guard n <= UInt64(RoomSnapshotRecord.maxEntries), n <= UInt64(bytes.count - index) else { throw .malformedSnapshot("count") }
        return Int(n)
    }

    mutating func lengthPrefixed() throws(RelayRestoreError) -> [UInt8] {
        let n = try varint()
        guard n <= UInt64(bytes.count - index) else { throw .malformedSnapshot("truncated") }
        defer { index += Int(n) }
        return Array(bytes[index..<index + Int(n)])
    }

    mutating func string() throws(RelayRestoreError) -> String {
        let raw = try lengthPrefixed()
        guard raw.count <= SessionMessageCodec.maxUserNameBytes, let s = String(validating: raw, as: UTF8.self) else {
            throw .malformedSnapshot("name")
        }
        return s
    }
}

extension Relay {
    /// The room compacted at its head, for the store (`nil` for an unknown room). Call it when
    /// the daemon compacts (e.g. after a `clear`, or every so many batches); it costs one
    /// snapshot of the board, and starts `garbageSinceSnapshot` afresh.
    public func snapshotRecord(room name: String) -> RoomSnapshotRecord? {
        guard let room = rooms[name] else { return nil }
        room.garbage = RoomGarbage()
        var batches: [[UInt8]] = []
        for batch in room.board.snapshotBatches(maxCommandsPerBatch: limits.snapshotCommandsPerBatch) {
            var state = BinaryCodecState()
            guard let payload = try? BinaryBatchCodec.encode(batch, state: &state, selfContained: true) else { continue }
            batches.append(payload)
        }
        let users = room.users.values.sorted { $0.name < $1.name }
            .map { RoomSnapshotRecord.User(name: $0.name, author: $0.author, drawRight: $0.drawRight) }
        // Producers with a batch in the log (not those whose every batch was refused).
        let origins = room.origins.filter { $0.value.lastOriginSeq > 0 }.sorted { $0.key < $1.key }
            .map { RoomSnapshotRecord.Origin(origin: $0.key, lastOriginSeq: $0.value.lastOriginSeq, lastRoomSeq: $0.value.lastRoomSeq) }
        return RoomSnapshotRecord(room: name, throughRoomSeq: room.head, digest: room.headDigest(), users: users,
                                  origins: origins, batches: batches)
    }

    /// Rebuilds a room from a compacted snapshot at start; then `restore(_:)` the records after
    /// `throughRoomSeq`. The room must not exist yet.
    public func restore(snapshot: RoomSnapshotRecord) throws(RelayRestoreError) {
        guard rooms[snapshot.room] == nil else { throw .outOfOrder(expected: 0, got: snapshot.throughRoomSeq) }
        guard rooms.count < limits.maxRooms else { throw .tooManyRooms }
        let room = newRoom(snapshot.room)
        for (i, payload) in snapshot.batches.enumerated() {
            var fresh = BinaryCodecState()
            guard let batch = try? BinaryBatchCodec.decode(payload, state: &fresh) else {
                throw .undecodablePayload(roomSeq: UInt64(i))
            }
            room.board.apply(batch)
        }
        guard room.board.digest == snapshot.digest else { throw .digestMismatch(roomSeq: snapshot.throughRoomSeq) }
        for u in snapshot.users {
            room.users[u.name] = RoomUser(author: u.author, name: u.name, drawRight: u.drawRight)
            if u.author.rawValue >= room.nextAuthor { room.nextAuthor = u.author.rawValue &+ 1 }
        }
        for o in snapshot.origins {
            room.noteOrigin(o.origin, originSeq: o.lastOriginSeq, roomSeq: o.lastRoomSeq, limit: limits.maxOriginsPerRoom)
        }
        room.head = snapshot.throughRoomSeq
        room.durable = snapshot.throughRoomSeq
        room.tail.reset(after: snapshot.throughRoomSeq)
        rooms[snapshot.room] = room
    }
}
