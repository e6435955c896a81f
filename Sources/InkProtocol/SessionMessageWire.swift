// Byte-level helpers of the session message codec: LEB128 varints (minimal form only),
// length-prefixed bytes and strings, big-endian fixed integers. Short input is a typed error.

/// Why bytes are not a valid session message. Decoding never traps.
public enum SessionMessageError: Error, Hashable, Sendable {
    /// Fewer bytes than a field or the declared body needs.
    case truncated
    /// Byte 0 names a version this decoder does not speak.
    case unsupportedVersion(UInt8)
    case varintOverflow
    case nonMinimalVarint
    /// The message, or one of its fields (named), is longer than its bound.
    case tooLarge(String)
    /// Bytes after the declared body.
    case trailingBytes
    /// A string field (named) is not UTF-8.
    case invalidUTF8(String)
    /// A field (named) holds a value this version does not allow.
    case invalidValue(String)
    /// A client message given to the server decoder or the reverse.
    case wrongDirection(kind: UInt64)
}

struct MessageWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 32) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func u64(_ v: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    mutating func lengthPrefixed(_ b: [UInt8]) {
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    mutating func string(_ s: String) { lengthPrefixed(Array(s.utf8)) }

    static func varintSize(_ v: UInt64) -> Int {
        var n = 1
        var v = v >> 7
        while v != 0 { n += 1; v >>= 7 }
        return n
    }
}

struct MessageReader {
    let bytes: [UInt8]
    var index: Int
    let end: Int

    init(_ bytes: [UInt8], from start: Int, end: Int) {
        self.bytes = bytes
        self.index = start
        self.end = end
    }

    var remaining: Int { end - index }

    mutating func u8() throws(SessionMessageError) -> UInt8 {
        guard index < end else { throw .truncated }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func bool(_ field: String) throws(SessionMessageError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        default: throw .invalidValue(field)
        }
    }

    mutating func varint() throws(SessionMessageError) -> UInt64 {
        switch LEB128.decode(bytes, at: &index, end: end, maxBytes: 10) {
        case .value(let v): return v
        case .truncated: throw .truncated
        case .overflow: throw .varintOverflow
        case .nonMinimal: throw .nonMinimalVarint
        }
    }

    mutating func varint32(_ field: String) throws(SessionMessageError) -> UInt32 {
        let v = try varint()
        guard v <= UInt64(UInt32.max) else { throw .invalidValue(field) }
        return UInt32(v)
    }

    mutating func varint16(_ field: String) throws(SessionMessageError) -> UInt16 {
        let v = try varint()
        guard v <= UInt64(UInt16.max) else { throw .invalidValue(field) }
        return UInt16(v)
    }

    mutating func u64() throws(SessionMessageError) -> UInt64 {
        guard end - index >= 8 else { throw .truncated }
        var v: UInt64 = 0
        for i in 0..<8 { v = v << 8 | UInt64(bytes[index + i]) }
        index += 8
        return v
    }

    /// A length-prefixed byte field of at most `max` bytes.
    mutating func lengthPrefixed(max: Int, _ field: String) throws(SessionMessageError) -> [UInt8] {
        let n = try varint()
        guard n <= UInt64(max) else { throw .tooLarge(field) }
        let count = Int(n)
        guard end - index >= count else { throw .truncated }
        defer { index += count }
        return Array(bytes[index..<index + count])
    }

    mutating func string(max: Int, _ field: String) throws(SessionMessageError) -> String {
        let raw = try lengthPrefixed(max: max, field)
        guard let s = String(validating: raw, as: UTF8.self) else { throw .invalidUTF8(field) }
        return s
    }
}
