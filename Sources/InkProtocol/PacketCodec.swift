/// The packets of protocol version 2 (docs/protocol.md 4.1): byte 0 is `version << 4 | type`.
/// On datagrams the connection id follows; the stream form (4.6) has none.
public enum PacketType: UInt8, Sendable {
    case transportPhase0 = 0
    case transportPhase1 = 1
    case initiation = 2
    case response = 3
    case reset = 4
    case keyRequest = 5
    case keyReply = 6
    case notice = 7

    /// The transport type of key phase `phase` (its low bit).
    static func transport(phase: UInt64) -> PacketType { phase & 1 == 0 ? .transportPhase0 : .transportPhase1 }

    public var isTransport: Bool { self == .transportPhase0 || self == .transportPhase1 }
}

/// Why a daemon did not accept an initiation (a `notice` packet, docs/protocol.md 4.5).
public enum NoticeCode: UInt8, Sendable, Equatable {
    /// The initiation did not open with this daemon's static key (the key in the notice).
    case keyMismatch = 1
    /// Too many handshakes or sessions now: try again later.
    case busy = 2
}

/// Sizes, parsing and building of packets. Decoding never traps: short or foreign bytes give nil.
public enum PacketCodec {
    /// The protocol version (high nibble of byte 0).
    public static let version: UInt8 = 2
    /// Largest datagram accepted or produced (an Ethernet-sized UDP payload).
    public static let maxDatagramBytes = 1472
    /// Type, connection id, packet number: the authenticated header of a transport packet.
    public static let transportHeaderBytes = 13
    /// What sealing adds around a frame: header and tag.
    public static let transportOverhead = transportHeaderBytes + SessionCryptoSizes.tagBytes
    /// Smallest transport packet: header, a 5-byte frame, tag.
    public static let minTransportBytes = transportOverhead + FrameCodec.minFrameBytes
    /// Type and connection id, in front of a handshake message.
    public static let handshakeHeaderBytes = 9
    /// Type, connection id, token.
    public static let resetBytes = 9 + StatelessReset.tokenBytes
    /// A key request is padded to this, so the reply (41 bytes) never amplifies.
    public static let keyRequestBytes = 64
    public static let keyReplyBytes = 9 + SessionCryptoSizes.keyBytes
    public static let noticeBytes = 10 + SessionCryptoSizes.keyBytes
    /// Largest initiation: a join of the largest token and names fits a datagram.
    public static let maxInitiationBytes = maxDatagramBytes

    static func typeByte(_ type: PacketType) -> UInt8 { version << 4 | type.rawValue }

    /// Byte 0 parsed: the packet type, or nil for another version or an unknown type.
    public static func type(ofFirstByte b: UInt8) -> PacketType? {
        guard b >> 4 == version else { return nil }
        return PacketType(rawValue: b & 0x0F)
    }

    /// Routing peek: the type and connection id of a datagram, without touching the rest.
    public static func peek(_ datagram: UnsafeRawBufferPointer) -> (type: PacketType, connectionID: UInt64)? {
        guard datagram.count >= 9, datagram.count <= maxDatagramBytes, let type = type(ofFirstByte: datagram[0]) else { return nil }
        return (type, readU64(datagram, at: 1))
    }

    public static func peek(_ datagram: [UInt8]) -> (type: PacketType, connectionID: UInt64)? {
        datagram.withUnsafeBytes { peek($0) }
    }

    static func readU64(_ b: UnsafeRawBufferPointer, at i: Int) -> UInt64 {
        var v: UInt64 = 0
        for k in 0..<8 { v = v << 8 | UInt64(b[i + k]) }
        return v
    }

    static func readU32(_ b: UnsafeRawBufferPointer, at i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }

    static func appendU64(_ v: UInt64, to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    static func storeU64(_ v: UInt64, _ b: UnsafeMutableRawBufferPointer, at i: Int) {
        for k in 0..<8 { b[i + k] = UInt8(truncatingIfNeeded: v >> UInt64(56 - 8 * k)) }
    }

    static func storeU32(_ v: UInt32, _ b: UnsafeMutableRawBufferPointer, at i: Int) {
        for k in 0..<4 { b[i + k] = UInt8(truncatingIfNeeded: v >> UInt32(24 - 8 * k)) }
    }

    // MARK: handshake, reset, notices, keys (datagrams)

    /// `type || cid || message`.
    static func handshakePacket(_ type: PacketType, connectionID: UInt64, message: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [typeByte(type)]
        out.reserveCapacity(handshakeHeaderBytes + message.count)
        appendU64(connectionID, to: &out)
        out.append(contentsOf: message)
        return out
    }

    public static func reset(connectionID: UInt64, token: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [typeByte(.reset)]
        appendU64(connectionID, to: &out)
        out.append(contentsOf: token)
        return out
    }

    public static func keyRequest(connectionID: UInt64) -> [UInt8] {
        var out: [UInt8] = [typeByte(.keyRequest)]
        appendU64(connectionID, to: &out)
        out.append(contentsOf: repeatElement(0, count: keyRequestBytes - out.count))
        return out
    }

    public static func keyReply(connectionID: UInt64, key: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [typeByte(.keyReply)]
        appendU64(connectionID, to: &out)
        out.append(contentsOf: key)
        return out
    }

    public static func notice(connectionID: UInt64, code: NoticeCode, key: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [typeByte(.notice)]
        appendU64(connectionID, to: &out)
        out.append(code.rawValue)
        out.append(contentsOf: key)
        return out
    }

    /// A notice's code and key, or nil when `datagram` is not a well-formed notice.
    public static func parseNotice(_ datagram: [UInt8], streamForm: Bool = false) -> (code: NoticeCode, key: [UInt8])? {
        let start = streamForm ? 1 : 9
        guard datagram.count == start + 1 + 32, type(ofFirstByte: datagram[0]) == .notice,
              let code = NoticeCode(rawValue: datagram[start]) else { return nil }
        return (code, Array(datagram[(start + 1)...]))
    }

    // MARK: packet numbers

    /// The full packet number nearest `expected` whose low 32 bits are `truncated` (RFC 9000
    /// appendix A.3 with a 32-bit field).
    public static func reconstructPacketNumber(truncated: UInt32, expected: UInt64) -> UInt64 {
        let window: UInt64 = 1 << 32
        let half = window / 2
        let candidate = (expected & ~(window - 1)) | UInt64(truncated)
        if candidate + half <= expected && candidate < (1 << 62) - window { return candidate + window }
        if candidate > expected + half && candidate >= window { return candidate - window }
        return candidate
    }

    // MARK: protocol 1

    /// Whether a datagram is a protocol 1 frame (version nibble 1, CRC-32C valid): its sender
    /// gets `ProtocolOneRefusal`.
    public static func isProtocolOne(_ datagram: UnsafeRawBufferPointer) -> Bool {
        guard datagram.count >= 11, datagram.count <= maxDatagramBytes, datagram[0] >> 4 == 1 else { return false }
        let end = datagram.count - 4
        return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: datagram[0..<end])) == readU32(datagram, at: end)
    }
}
