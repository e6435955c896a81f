/// Appends big-endian integers and LEB128 varints to a byte array.
struct ByteWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    mutating func writeU8(_ v: UInt8) { bytes.append(v) }

    mutating func writeU32(_ v: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 24))
        bytes.append(UInt8(truncatingIfNeeded: v >> 16))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    mutating func writeVarint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func writeBytes<C: Collection>(_ b: C) where C.Element == UInt8 { bytes.append(contentsOf: b) }

    /// Bytes a LEB128 varint of `v` takes (1...10).
    static func varintSize(_ v: UInt64) -> Int {
        var n = 1
        var v = v >> 7
        while v != 0 { n += 1; v >>= 7 }
        return n
    }
}

/// Reads what `ByteWriter` writes from a bounded slice; short or overlong input is a typed error.
///
/// It reads borrowed memory (a received datagram in the socket's buffer, or an array's
/// storage) without copying it: only valid inside the scope that lent the bytes.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var index: Int
    let end: Int

    init(_ bytes: UnsafeRawBufferPointer, end: Int) {
        self.bytes = bytes
        self.index = 0
        // Never past the memory lent, whatever the caller computed.
        self.end = min(max(end, 0), bytes.count)
    }

    var remaining: Int { end - index }

    mutating func readU8() throws(FrameError) -> UInt8 {
        guard index < end else { throw .truncated }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func readU32() throws(FrameError) -> UInt32 {
        guard end - index >= 4 else { throw .truncated }
        let v = UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8 | UInt32(bytes[index + 3])
        index += 4
        return v
    }

    /// A LEB128 varint of at most `maxBytes` bytes (10 for 64 bits); must fit in 64 bits.
    mutating func readVarint(maxBytes: Int = 10) throws(FrameError) -> UInt64 {
        switch LEB128.decode(bytes, at: &index, end: end, maxBytes: maxBytes) {
        case .value(let v): return v
        case .truncated: throw .truncated
        case .overflow: throw .varintOverflow
        case .nonMinimal: throw .nonMinimalVarint
        }
    }

    /// A varint that must fit in 32 bits.
    mutating func readVarint32() throws(FrameError) -> UInt32 {
        let v = try readVarint(maxBytes: 5)
        guard v <= UInt64(UInt32.max) else { throw .varintOverflow }
        return UInt32(v)
    }

    /// `n` bytes copied out: the one place a reader allocates, for bytes that outlive the
    /// lent memory (a segment's payload, an extension's value).
    mutating func readBytes(_ n: Int) throws(FrameError) -> [UInt8] {
        guard n >= 0, end - index >= n else { throw .truncated }
        defer { index += n }
        return Array(UnsafeRawBufferPointer(rebasing: bytes[index..<index + n]))
    }
}

/// The one LEB128 varint decoder behind every reader in this module (frames, session
/// messages); each reader maps the outcome onto its own error type.
enum LEB128 {
    enum Outcome: Equatable {
        case value(UInt64)
        case truncated
        /// Longer than `maxBytes` or more than 64 bits.
        case overflow
        /// A trailing zero byte: rejected so every value has exactly one byte form.
        case nonMinimal
    }

    /// Decodes at `index` (advanced past what was read) without reading at or beyond `end`.
    static func decode<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at index: inout Int, end: Int, maxBytes: Int) -> Outcome
    where Bytes.Index == Int {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        for count in 0..<maxBytes {
            guard index < end else { return .truncated }
            let b = bytes[index]
            index += 1
            let low = UInt64(b & 0x7F)
            if shift == 63 && low > 1 { return .overflow }
            result |= low << shift
            if b & 0x80 == 0 {
                if count > 0 && b == 0 { return .nonMinimal }
                return .value(result)
            }
            shift += 7
        }
        return .overflow
    }
}
