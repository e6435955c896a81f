// The bridge's messages on the broker: binary, versioned, bounded (docs/protocol.md section 9).
import InkCodec
import InkProtocol

/// A daemon's claim to be a room's home (retained on `PREFIX/room/R/home`).
public struct BridgeClaim: Hashable, Sendable {
    public var daemon: String
    /// The claimant's room head when it claimed: a daemon with more history wins a race.
    public var head: UInt64
    public init(daemon: String, head: UInt64) {
        self.daemon = daemon
        self.head = head
    }

    /// Whether this claim wins over `other`: the larger head, then the smaller daemon id.
    public func beats(_ other: BridgeClaim) -> Bool {
        head != other.head ? head > other.head : daemon < other.daemon
    }
}

/// One bridge message. Every message names its room (the topic only routes).
public enum BridgeMessage: Hashable, Sendable {
    /// `PREFIX/room/R/home`, retained.
    case claim(room: String, BridgeClaim)
    /// `PREFIX/room/R/forward/DAEMON`: a local member's batch on its way to the home. Numbered
    /// `forwardSeq` 1, 2, ... per `(daemon, incarnation)`; `floor` is the lowest number the
    /// forwarder still holds (everything before it is in the home's log).
    case forward(daemon: String, incarnation: UInt64, forwardSeq: UInt64, floor: UInt64, ForwardedBatch)
    /// `PREFIX/room/R/log`: the home's numbered, durable batches.
    case record(RelayRecord)
    /// `PREFIX/room/R/log`: the home's durable head, every `headInterval`.
    case head(room: String, daemon: String, roomSeq: UInt64)
    /// `PREFIX/room/R/request`: send me `from...through` (gap repair, history sync).
    case request(room: String, requester: String, from: UInt64, through: UInt64)
    /// `PREFIX/room/R/response/REQUESTER`: consecutive records answering a request.
    case response(room: String, records: [RelayRecord])
}

/// A malformed bridge message (never a trap).
public enum BridgeWireError: Error, Hashable, Sendable {
    case truncated
    case unsupportedVersion(UInt8)
    case unknownKind(UInt8)
    case tooLarge(String)
    case badString
    case badValue(String)
    case trailingBytes
}

/// Encodes and decodes `BridgeMessage`:
///
///     message = version:u8 (=1) kind:u8 room:string body
///
/// varints LEB128, strings and bytes a varint length then the bytes; see docs/protocol.md 9.
public enum BridgeWire {
    public static let version: UInt8 = 1
    /// Largest message; well below mosquitto's and EMQX's defaults (256 MiB, 1 MiB).
    public static let maxMessageBytes = 1 << 20
    /// Room names, daemon ids and user names.
    public static let maxNameBytes = 64
    /// A batch payload (the relay's own limit is lower).
    public static let maxPayloadBytes = 256 * 1024
    /// Records in one response chunk.
    public static let maxRecordsPerResponse = 4096
    /// Largest room or forward number (`roomSeq`, `forwardSeq`, a head): a batch a millisecond
    /// would take 146 million years to reach it, and a receiver counting one past it never
    /// overflows. Larger numbers are malformed.
    public static let maxSequence: UInt64 = 1 << 62

    enum Kind: UInt8 {
        case claim = 1, forward = 2, record = 3, head = 4, request = 5, response = 6
    }

    public static func encode(_ message: BridgeMessage) -> [UInt8] {
        var w = Writer()
        w.u8(version)
        switch message {
        case .claim(let room, let c):
            w.u8(Kind.claim.rawValue); w.string(room); w.string(c.daemon); w.varint(c.head)
        case .forward(let daemon, let incarnation, let seq, let floor, let b):
            w.u8(Kind.forward.rawValue); w.string(b.room); w.string(daemon); w.varint(incarnation); w.varint(seq); w.varint(floor)
            w.varint(b.origin); w.varint(b.originSeq); w.string(b.user); w.bytes(b.payload)
        case .record(let r):
            w.u8(Kind.record.rawValue); w.string(r.room); w.record(r)
        case .head(let room, let daemon, let seq):
            w.u8(Kind.head.rawValue); w.string(room); w.string(daemon); w.varint(seq)
        case .request(let room, let requester, let from, let through):
            w.u8(Kind.request.rawValue); w.string(room); w.string(requester); w.varint(from); w.varint(through)
        case .response(let room, let records):
            w.u8(Kind.response.rawValue); w.string(room); w.varint(UInt64(records.count))
            for r in records { w.record(r) }
        }
        return w.bytes
    }

    /// The encoded size of `record` inside a response (to cut chunks).
    public static func encodedSize(_ record: RelayRecord) -> Int {
        var w = Writer()
        w.record(record)
        return w.bytes.count
    }

    public static func decode(_ bytes: [UInt8]) throws(BridgeWireError) -> BridgeMessage {
        guard bytes.count <= maxMessageBytes else { throw .tooLarge("message") }
        var r = Reader(bytes: bytes)
        let v = try r.u8()
        guard v == version else { throw .unsupportedVersion(v) }
        let k = try r.u8()
        guard let kind = Kind(rawValue: k) else { throw .unknownKind(k) }
        let room = try r.name()
        let message: BridgeMessage
        switch kind {
        case .claim:
            message = .claim(room: room, BridgeClaim(daemon: try r.name(), head: try r.sequence(allowZero: true)))
        case .forward:
            let daemon = try r.name()
            let incarnation = try r.varint(), seq = try r.sequence(allowZero: false), floor = try r.varint()
            let origin = try r.varint(), originSeq = try r.varint()
            let user = try r.name()
            let payload = try r.bytes(max: maxPayloadBytes)
            guard seq > 0, floor <= seq else { throw .badValue("forward number") }
            message = .forward(daemon: daemon, incarnation: incarnation, forwardSeq: seq, floor: floor,
                               ForwardedBatch(room: room, origin: origin, originSeq: originSeq, user: user, payload: payload))
        case .record:
            message = .record(try r.record(room: room))
        case .head:
            message = .head(room: room, daemon: try r.name(), roomSeq: try r.sequence(allowZero: true))
        case .request:
            let requester = try r.name()
            let from = try r.varint(), through = try r.varint()
            guard from > 0, from <= through else { throw .badValue("request range") }
            message = .request(room: room, requester: requester, from: from, through: through)
        case .response:
            let count = try r.varint()
            guard count <= UInt64(maxRecordsPerResponse) else { throw .tooLarge("response records") }
            var records: [RelayRecord] = []
            for _ in 0..<count { records.append(try r.record(room: room)) }
            message = .response(room: room, records: records)
        }
        guard r.index == bytes.count else { throw .trailingBytes }
        return message
    }

    private struct Writer {
        var bytes: [UInt8] = []
        mutating func u8(_ v: UInt8) { bytes.append(v) }
        mutating func varint(_ v: UInt64) {
            var v = v
            while v >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
                v >>= 7
            }
            bytes.append(UInt8(v))
        }
        mutating func bytes(_ b: [UInt8]) {
            varint(UInt64(b.count))
            bytes.append(contentsOf: b)
        }
        mutating func string(_ s: String) { bytes(Array(s.utf8)) }
        mutating func record(_ r: RelayRecord) {
            varint(r.roomSeq); varint(UInt64(r.author.rawValue)); string(r.user); varint(r.origin); varint(r.originSeq)
            varint(r.timeMs); bytes(r.payload)
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0
        mutating func u8() throws(BridgeWireError) -> UInt8 {
            guard index < bytes.count else { throw .truncated }
            defer { index += 1 }
            return bytes[index]
        }
        mutating func varint() throws(BridgeWireError) -> UInt64 {
            var value: UInt64 = 0
            for i in 0..<10 {
                let b = try u8()
                if i == 9 && b > 1 { throw .badValue("varint") }
                value |= UInt64(b & 0x7f) << UInt64(7 * i)
                if b & 0x80 == 0 {
                    if i > 0 && b == 0 { throw .badValue("non-minimal varint") }
                    return value
                }
            }
            throw .badValue("varint")
        }
        /// A room or forward number, at most `maxSequence`.
        mutating func sequence(allowZero: Bool) throws(BridgeWireError) -> UInt64 {
            let n = try varint()
            guard n <= BridgeWire.maxSequence, allowZero || n > 0 else { throw .badValue("sequence number") }
            return n
        }
        mutating func bytes(max: Int) throws(BridgeWireError) -> [UInt8] {
            let n = try varint()
            guard n <= UInt64(max) else { throw .tooLarge("field of \(n) bytes") }
            guard UInt64(bytes.count - index) >= n else { throw .truncated }
            defer { index += Int(n) }
            return Array(bytes[index..<index + Int(n)])
        }
        mutating func name() throws(BridgeWireError) -> String {
            let b = try bytes(max: BridgeWire.maxNameBytes)
            guard let s = String(validating: b, as: UTF8.self) else { throw .badString }
            return s
        }
        mutating func record(room: String) throws(BridgeWireError) -> RelayRecord {
            let seq = try sequence(allowZero: false), author = try varint()
            guard author <= UInt64(UInt32.max) else { throw .badValue("record") }
            let user = try name()
            let origin = try varint(), originSeq = try varint(), time = try varint()
            let payload = try bytes(max: BridgeWire.maxPayloadBytes)
            return RelayRecord(room: room, roomSeq: seq, author: AuthorID(UInt32(author)), user: user, origin: origin,
                               originSeq: originSeq, timeMs: time, payload: payload)
        }
    }
}

/// The bridge's topics under a prefix (default `inkwire`). Room names are escaped so that a
/// name is one topic level: bytes other than `A-Z a-z 0-9 - . _ ~` become `%XX`.
public struct BridgeTopics: Sendable {
    public let prefix: String
    public init(prefix: String) { self.prefix = prefix }

    public static func escape(_ room: String) -> String {
        var out = ""
        for b in room.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(b >> 4)])
                out.unicodeScalars.append(hex[Int(b & 15)])
            }
        }
        return out
    }

    func room(_ room: String) -> String { "\(prefix)/room/\(BridgeTopics.escape(room))" }
    public func home(_ room: String) -> String { self.room(room) + "/home" }
    public func log(_ room: String) -> String { self.room(room) + "/log" }
    public func request(_ room: String) -> String { self.room(room) + "/request" }
    public func forward(_ room: String, daemon: String) -> String { self.room(room) + "/forward/" + BridgeTopics.escape(daemon) }
    public func forwards(_ room: String) -> String { self.room(room) + "/forward/+" }
    public func response(_ room: String, daemon: String) -> String { self.room(room) + "/response/" + BridgeTopics.escape(daemon) }
}
