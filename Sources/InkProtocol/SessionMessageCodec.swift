// Encodes and decodes `ClientMessage` and `ServerMessage` (docs/protocol.md, "Session messages").
//
//     message = version:u8 kind:varint bodyLength:varint body
//
// A decoder skips a kind it does not know (`.unknown`), and ignores body bytes after the fields
// it knows, so a later version may append fields to a kind. Bytes after the body are an error.
import InkCodec

public enum SessionMessageCodec {
    /// Byte 0 of every message.
    public static let version: UInt8 = 1
    /// Largest message accepted or produced (equals the ARQ session's default message bound).
    public static let maxMessageBytes = 1 << 20
    /// Largest batch payload (compact binary codec bytes) in a batch or room batch.
    public static let maxBatchPayloadBytes = 256 * 1024
    /// Longest room name, in UTF-8 bytes.
    public static let maxRoomNameBytes = 64
    /// Longest user name, in UTF-8 bytes.
    public static let maxUserNameBytes = 64
    /// Longest join token.
    public static let maxTokenBytes = 1024
    /// Longest human-readable text (refusals, errors, going away).
    public static let maxTextBytes = 512
    /// Most items one sync chunk carries.
    public static let maxSyncItemsPerChunk = 4096
    /// Largest data of one `blobPut` or `blobChunk`.
    public static let maxBlobPartBytes = 64 * 1024
    /// Largest blob a message may describe (the daemon's own limit is lower, a setting).
    public static let maxBlobBytes: UInt32 = 64 * 1024 * 1024

    // Kinds: client -> daemon below 32, daemon -> client from 32.
    static let kJoin: UInt64 = 1
    static let kBatch: UInt64 = 2
    static let kGrantDraw: UInt64 = 3
    static let kRevokeDraw: UInt64 = 4
    static let kSyncAck: UInt64 = 5
    static let kLeave: UInt64 = 6
    static let kBlobPut: UInt64 = 7
    static let kBlobRequest: UInt64 = 8
    static let kBlobAck: UInt64 = 9
    static let kPing: UInt64 = 10
    static let lastClientKind: UInt64 = 10
    static let firstServerKind: UInt64 = 32
    static let kJoinAccepted: UInt64 = 32
    static let kJoinRefused: UInt64 = 33
    static let kRoomBatch: UInt64 = 34
    static let kBatchAck: UInt64 = 35
    static let kError: UInt64 = 36
    static let kMember: UInt64 = 37
    static let kSyncBegin: UInt64 = 38
    static let kSyncChunk: UInt64 = 39
    static let kSyncDone: UInt64 = 40
    static let kGoingAway: UInt64 = 41
    static let kBlobChunk: UInt64 = 42
    static let kBlobStored: UInt64 = 43
    static let kBlobMissing: UInt64 = 44
    static let lastServerKind: UInt64 = 44

    // MARK: encoding

    public static func encode(_ message: ClientMessage) -> [UInt8] {
        var b = MessageWriter()
        let kind: UInt64
        switch message {
        case .join(let j):
            kind = kJoin
            b.string(j.room)
            b.string(j.user)
            b.u8(j.role.rawValue)
            b.lengthPrefixed(j.token)
            b.varint(j.origin)
            switch j.have {
            case .nothing:
                b.u8(0)
            case .upTo(let seq, let digest):
                b.u8(1)
                b.varint(seq)
                b.u64(digest)
            case .partialSnapshot(let seq, let chunk):
                b.u8(2)
                b.varint(seq)
                b.varint(UInt64(chunk))
            }
        case .batch(let originSeq, let payload):
            kind = kBatch
            b = MessageWriter(capacity: payload.count + 8)
            b.varint(originSeq)
            b.lengthPrefixed(payload)
        case .grantDraw(let user):
            kind = kGrantDraw
            b.string(user)
        case .revokeDraw(let user):
            kind = kRevokeDraw
            b.string(user)
        case .syncAck(let id, let chunk):
            kind = kSyncAck
            b.varint(UInt64(id))
            b.varint(UInt64(chunk))
        case .leave:
            kind = kLeave
        case .ping:
            kind = kPing
        case .blobPut(let hash, let size, let offset, let data):
            kind = kBlobPut
            b = MessageWriter(capacity: data.count + 48)
            b.bytes += hash.bytes
            b.varint(UInt64(size))
            b.varint(UInt64(offset))
            b.lengthPrefixed(data)
        case .blobRequest(let hash, let first):
            kind = kBlobRequest
            b.bytes += hash.bytes
            b.varint(UInt64(first))
        case .blobAck(let hash, let chunk):
            kind = kBlobAck
            b.bytes += hash.bytes
            b.varint(UInt64(chunk))
        case .unknown(let k):
            kind = k
        }
        return frame(kind: kind, body: b.bytes)
    }

    public static func encode(_ message: ServerMessage) -> [UInt8] {
        if case .roomBatch(let rb) = message { return encode(rb) }
        var b = MessageWriter()
        let kind: UInt64
        switch message {
        case .joinAccepted(let member, let role, let head, let syncFollows):
            kind = kJoinAccepted
            b.varint(UInt64(member.rawValue))
            b.u8(role.rawValue)
            b.varint(head)
            b.u8(syncFollows ? 1 : 0)
        case .joinRefused(let reason, let text):
            kind = kJoinRefused
            b.varint(UInt64(reason.rawValue))
            b.string(bounded(text))
        case .roomBatch(let rb):
            return encode(rb)
        case .batchAck(let originSeq, let roomSeq):
            kind = kBatchAck
            b.varint(originSeq)
            b.varint(roomSeq)
        case .error(let code, let originSeq, let text):
            kind = kError
            b.varint(UInt64(code.rawValue))
            b.varint(originSeq)
            b.string(bounded(text))
        case .member(let id, let user, let role, let present):
            kind = kMember
            b.varint(UInt64(id.rawValue))
            b.string(user)
            b.u8(role.rawValue)
            b.u8(present ? 1 : 0)
        case .syncBegin(let s):
            kind = kSyncBegin
            b.varint(UInt64(s.syncID))
            b.u8(s.mode.rawValue)
            b.varint(s.afterRoomSeq)
            b.varint(s.throughRoomSeq)
            b.varint(UInt64(s.firstChunk))
        case .syncChunk(let id, let index, let items):
            kind = kSyncChunk
            b = MessageWriter(capacity: items.reduce(16) { $0 + $1.payload.count + 16 })
            b.varint(UInt64(id))
            b.varint(UInt64(index))
            b.varint(UInt64(items.count))
            for item in items {
                b.varint(item.roomSeq)
                b.varint(UInt64(item.author.rawValue))
                b.varint(item.timeMs)
                b.lengthPrefixed(item.payload)
            }
        case .syncDone(let id, let roomSeq, let digest):
            kind = kSyncDone
            b.varint(UInt64(id))
            b.varint(roomSeq)
            b.u64(digest)
        case .goingAway(let reason, let text):
            kind = kGoingAway
            b.varint(UInt64(reason.rawValue))
            b.string(bounded(text))
        case .blobChunk(let hash, let size, let index, let count, let data):
            kind = kBlobChunk
            b = MessageWriter(capacity: data.count + 48)
            b.bytes += hash.bytes
            b.varint(UInt64(size))
            b.varint(UInt64(index))
            b.varint(UInt64(count))
            b.lengthPrefixed(data)
        case .blobStored(let hash, let width, let height):
            kind = kBlobStored
            b.bytes += hash.bytes
            b.varint(UInt64(width))
            b.varint(UInt64(height))
        case .blobMissing(let hash):
            kind = kBlobMissing
            b.bytes += hash.bytes
        case .unknown(let k):
            kind = k
        }
        return frame(kind: kind, body: b.bytes)
    }

    /// A `roomBatch` (one per member per live batch: the fan-out's message), written into one
    /// buffer sized beforehand: the same bytes as `frame(kind:body:)`, without a body buffer
    /// and its copy.
    private static func encode(_ rb: RoomBatch) -> [UInt8] {
        let author = UInt64(rb.author.rawValue)
        let payloadCount = UInt64(rb.payload.count)
        let body = MessageWriter.varintSize(rb.roomSeq) + MessageWriter.varintSize(author) + MessageWriter.varintSize(rb.timeMs)
            + MessageWriter.varintSize(payloadCount) + rb.payload.count
        var w = MessageWriter(capacity: 1 + MessageWriter.varintSize(kRoomBatch) + MessageWriter.varintSize(UInt64(body)) + body)
        w.u8(version)
        w.varint(kRoomBatch)
        w.varint(UInt64(body))
        w.varint(rb.roomSeq)
        w.varint(author)
        w.varint(rb.timeMs)
        w.lengthPrefixed(rb.payload)
        return w.bytes
    }

    /// The encoded size of a sync item inside a chunk (for packing chunks to a byte budget).
    public static func encodedSize(of item: SyncItem) -> Int {
        MessageWriter.varintSize(item.roomSeq) + MessageWriter.varintSize(UInt64(item.author.rawValue))
            + MessageWriter.varintSize(item.timeMs) + MessageWriter.varintSize(UInt64(item.payload.count)) + item.payload.count
    }

    private static func frame(kind: UInt64, body: [UInt8]) -> [UInt8] {
        var w = MessageWriter(capacity: body.count + 12)
        w.u8(version)
        w.varint(kind)
        w.varint(UInt64(body.count))
        w.bytes.append(contentsOf: body)
        return w.bytes
    }

    /// Texts are cut to their bound (on a character boundary) rather than refused.
    private static func bounded(_ text: String) -> String {
        guard text.utf8.count > maxTextBytes else { return text }
        var out = ""
        for ch in text {
            if out.utf8.count + String(ch).utf8.count > maxTextBytes { break }
            out.append(ch)
        }
        return out
    }

    // MARK: decoding

    /// Splits off version, kind and body; the body reader stops at the body's end.
    private static func open(_ bytes: [UInt8]) throws(SessionMessageError) -> (kind: UInt64, body: MessageReader) {
        guard bytes.count <= maxMessageBytes else { throw .tooLarge("message") }
        var r = MessageReader(bytes, from: 0, end: bytes.count)
        let v = try r.u8()
        guard v == version else { throw .unsupportedVersion(v) }
        let kind = try r.varint()
        let length = try r.varint()
        guard length <= UInt64(r.remaining) else { throw .truncated }
        guard length == UInt64(r.remaining) else { throw .trailingBytes }
        return (kind, MessageReader(bytes, from: r.index, end: bytes.count))
    }

    private static func blobHash(_ r: inout MessageReader) throws(SessionMessageError) -> BlobHash {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(BlobHash.byteCount)
        for _ in 0..<BlobHash.byteCount { bytes.append(try r.u8()) }
        return BlobHash(bytes)!
    }

    private static func role(_ raw: UInt8) throws(SessionMessageError) -> MemberRole {
        guard let role = MemberRole(rawValue: raw) else { throw .invalidValue("role") }
        return role
    }

    public static func decodeClient(_ bytes: [UInt8]) throws(SessionMessageError) -> ClientMessage {
        let (kind, body) = try open(bytes)
        var r = body
        switch kind {
        case kJoin:
            let room = try r.string(max: maxRoomNameBytes, "room")
            let user = try r.string(max: maxUserNameBytes, "user")
            let role = try role(try r.u8())
            let token = try r.lengthPrefixed(max: maxTokenBytes, "token")
            let origin = try r.varint()
            let have: JoinHave
            switch try r.u8() {
            case 0: have = .nothing
            case 1: have = .upTo(roomSeq: try r.varint(), digest: try r.u64())
            case 2: have = .partialSnapshot(snapshotRoomSeq: try r.varint(), lastChunk: try r.varint32("lastChunk"))
            default: throw .invalidValue("have")
            }
            return .join(JoinRequest(room: room, user: user, role: role, token: token, origin: origin, have: have))
        case kBatch:
            let originSeq = try r.varint()
            let payload = try r.lengthPrefixed(max: maxBatchPayloadBytes, "payload")
            return .batch(originSeq: originSeq, payload: payload)
        case kGrantDraw:
            return .grantDraw(user: try r.string(max: maxUserNameBytes, "user"))
        case kRevokeDraw:
            return .revokeDraw(user: try r.string(max: maxUserNameBytes, "user"))
        case kSyncAck:
            return .syncAck(syncID: try r.varint32("syncID"), chunk: try r.varint32("chunk"))
        case kLeave:
            return .leave
        case kPing:
            return .ping
        case kBlobPut:
            let hash = try blobHash(&r)
            let size = try r.varint32("size")
            let offset = try r.varint32("offset")
            let data = try r.lengthPrefixed(max: maxBlobPartBytes, "data")
            guard size >= 1, size <= maxBlobBytes, UInt64(offset) + UInt64(data.count) <= UInt64(size) else { throw .invalidValue("offset") }
            return .blobPut(hash: hash, size: size, offset: offset, data: data)
        case kBlobRequest:
            return .blobRequest(hash: try blobHash(&r), firstChunk: try r.varint32("firstChunk"))
        case kBlobAck:
            return .blobAck(hash: try blobHash(&r), chunk: try r.varint32("chunk"))
        case firstServerKind...lastServerKind:
            throw .wrongDirection(kind: kind)
        default:
            return .unknown(kind: kind)
        }
    }

    public static func decodeServer(_ bytes: [UInt8]) throws(SessionMessageError) -> ServerMessage {
        let (kind, body) = try open(bytes)
        var r = body
        switch kind {
        case kJoinAccepted:
            let member = AuthorID(try r.varint32("member"))
            let role = try role(try r.u8())
            let head = try r.varint()
            let follows = try r.bool("syncFollows")
            return .joinAccepted(member: member, role: role, roomHead: head, syncFollows: follows)
        case kJoinRefused:
            let raw = try r.varint16("reason")
            return .joinRefused(JoinRefusal(rawValue: raw) ?? .other, text: try r.string(max: maxTextBytes, "text"))
        case kRoomBatch:
            let seq = try r.varint()
            let author = AuthorID(try r.varint32("author"))
            let time = try r.varint()
            let payload = try r.lengthPrefixed(max: maxBatchPayloadBytes, "payload")
            return .roomBatch(RoomBatch(roomSeq: seq, author: author, timeMs: time, payload: payload))
        case kBatchAck:
            return .batchAck(originSeq: try r.varint(), roomSeq: try r.varint())
        case kError:
            let raw = try r.varint16("code")
            let originSeq = try r.varint()
            return .error(SessionErrorCode(rawValue: raw) ?? .other, originSeq: originSeq, text: try r.string(max: maxTextBytes, "text"))
        case kMember:
            let id = AuthorID(try r.varint32("member"))
            let user = try r.string(max: maxUserNameBytes, "user")
            let role = try role(try r.u8())
            return .member(id: id, user: user, role: role, present: try r.bool("present"))
        case kSyncBegin:
            let id = try r.varint32("syncID")
            guard let mode = SyncMode(rawValue: try r.u8()) else { throw .invalidValue("mode") }
            let after = try r.varint()
            let through = try r.varint()
            let first = try r.varint32("firstChunk")
            return .syncBegin(SyncBegin(syncID: id, mode: mode, afterRoomSeq: after, throughRoomSeq: through, firstChunk: first))
        case kSyncChunk:
            let id = try r.varint32("syncID")
            let index = try r.varint32("index")
            let count = try r.varint()
            guard count <= UInt64(maxSyncItemsPerChunk) else { throw .tooLarge("items") }
            var items: [SyncItem] = []
            items.reserveCapacity(Int(count))
            for _ in 0..<Int(count) {
                let seq = try r.varint()
                let author = AuthorID(try r.varint32("author"))
                let time = try r.varint()
                let payload = try r.lengthPrefixed(max: maxBatchPayloadBytes, "payload")
                items.append(SyncItem(roomSeq: seq, author: author, timeMs: time, payload: payload))
            }
            return .syncChunk(syncID: id, index: index, items: items)
        case kSyncDone:
            return .syncDone(syncID: try r.varint32("syncID"), roomSeq: try r.varint(), digest: try r.u64())
        case kGoingAway:
            let raw = try r.varint16("reason")
            return .goingAway(GoingAwayReason(rawValue: raw) ?? .other, text: try r.string(max: maxTextBytes, "text"))
        case kBlobChunk:
            let hash = try blobHash(&r)
            let size = try r.varint32("size")
            let index = try r.varint32("index")
            let count = try r.varint32("count")
            let data = try r.lengthPrefixed(max: maxBlobPartBytes, "data")
            guard size >= 1, size <= maxBlobBytes, count >= 1, index < count else { throw .invalidValue("index") }
            return .blobChunk(hash: hash, size: size, index: index, count: count, data: data)
        case kBlobStored:
            return .blobStored(hash: try blobHash(&r), width: try r.varint32("width"), height: try r.varint32("height"))
        case kBlobMissing:
            return .blobMissing(hash: try blobHash(&r))
        case kJoin...lastClientKind:
            throw .wrongDirection(kind: kind)
        default:
            return .unknown(kind: kind)
        }
    }
}
