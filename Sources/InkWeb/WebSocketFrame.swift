// WebSocket frames (RFC 6455 section 5): the header, masking, and an incremental decoder with
// every length bounded. No extensions are negotiated, so every RSV bit must be 0.

public enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0
    case text = 1
    case binary = 2
    case close = 8
    case ping = 9
    case pong = 10

    public var isControl: Bool { rawValue >= 8 }
}

/// Close status codes this implementation sends (RFC 6455 section 7.4.1).
public enum WebSocketCloseCode: UInt16, Sendable {
    case normal = 1000
    case goingAway = 1001
    case protocolError = 1002
    case unsupportedData = 1003
    case invalidPayload = 1007
    case policyViolation = 1008
    case tooBig = 1009
    case internalError = 1011
}

/// A protocol violation by the peer: the connection is closed with `code`.
public struct WebSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    public var code: WebSocketCloseCode
    public var reason: String
    public init(_ code: WebSocketCloseCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }
    public var description: String { "\(reason) (close \(code.rawValue))" }
}

public struct WebSocketFrame: Equatable, Sendable {
    public var fin: Bool
    public var opcode: WebSocketOpcode
    public var payload: [UInt8]

    public init(fin: Bool = true, opcode: WebSocketOpcode, payload: [UInt8]) {
        self.fin = fin
        self.opcode = opcode
        self.payload = payload
    }

    /// The frame's bytes; `mask` (a client's 4-byte key) masks the payload, nil for a server.
    public func encoded(mask: (UInt8, UInt8, UInt8, UInt8)? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 14)
        out.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        let n = payload.count
        if n < 126 {
            out.append(maskBit | UInt8(n))
        } else if n <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(n >> 8))
            out.append(UInt8(n & 0xFF))
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: UInt64(n) >> UInt64(shift))) }
        }
        if let m = mask {
            let key = [m.0, m.1, m.2, m.3]
            out.append(contentsOf: key)
            for (i, b) in payload.enumerated() { out.append(b ^ key[i & 3]) }
        } else {
            out.append(contentsOf: payload)
        }
        return out
    }
}

/// Splits received bytes into frames. `role` says who sends what it decodes: a server decodes a
/// client's frames, which must be masked; a client decodes a server's, which must not be.
public struct WebSocketFrameDecoder: Sendable {
    public enum Sender: Sendable { case client, server }

    /// Largest payload of one frame accepted (a data frame; control frames: 125).
    public let maxFramePayload: Int
    public let sender: Sender
    private var buffer: [UInt8] = []
    private var readIndex = 0

    public init(sender: Sender, maxFramePayload: Int) {
        self.sender = sender
        self.maxFramePayload = maxFramePayload
    }

    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Adds received bytes; drain `pollFrame` after each call (memory stays within one frame
    /// plus one read).
    public mutating func handleBytes(_ bytes: UnsafeRawBufferPointer) {
        if readIndex > 0 && readIndex >= buffer.count / 2 {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    public mutating func handleBytes(_ bytes: [UInt8]) { bytes.withUnsafeBytes { handleBytes($0) } }

    /// The next whole frame (payload unmasked), nil while more bytes are needed.
    public mutating func pollFrame() throws(WebSocketError) -> WebSocketFrame? {
        let available = buffer.count - readIndex
        guard available >= 2 else { return nil }
        let b0 = buffer[readIndex]
        let b1 = buffer[readIndex + 1]
        guard b0 & 0x70 == 0 else { throw WebSocketError(.protocolError, "reserved bits set (no extension was negotiated)") }
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else {
            throw WebSocketError(.protocolError, "unknown opcode \(b0 & 0x0F)")
        }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        switch sender {
        case .client: guard masked else { throw WebSocketError(.protocolError, "a client frame must be masked") }
        case .server: guard !masked else { throw WebSocketError(.protocolError, "a server frame must not be masked") }
        }
        var header = 2
        var length = UInt64(b1 & 0x7F)
        if length == 126 {
            guard available >= 4 else { return nil }
            length = UInt64(buffer[readIndex + 2]) << 8 | UInt64(buffer[readIndex + 3])
            guard length >= 126 else { throw WebSocketError(.protocolError, "length not in its shortest form") }
            header = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = 0
            for i in 0..<8 { length = length << 8 | UInt64(buffer[readIndex + 2 + i]) }
            guard length >> 63 == 0 else { throw WebSocketError(.protocolError, "length with its top bit set") }
            guard length > 0xFFFF else { throw WebSocketError(.protocolError, "length not in its shortest form") }
            header = 10
        }
        if opcode.isControl {
            guard fin else { throw WebSocketError(.protocolError, "fragmented control frame") }
            guard length <= 125 else { throw WebSocketError(.protocolError, "control frame longer than 125 bytes") }
        }
        guard length <= UInt64(maxFramePayload) else {
            throw WebSocketError(.tooBig, "frame of \(length) bytes, more than \(maxFramePayload)")
        }
        let maskAt = readIndex + header
        if masked { header += 4 }
        let total = header + Int(length)
        guard available >= total else { return nil }
        let start = readIndex + header
        var payload = Array(buffer[start..<(start + Int(length))])
        if masked {
            let key = (buffer[maskAt], buffer[maskAt + 1], buffer[maskAt + 2], buffer[maskAt + 3])
            payload.withUnsafeMutableBufferPointer { p in
                for i in 0..<p.count {
                    switch i & 3 {
                    case 0: p[i] ^= key.0
                    case 1: p[i] ^= key.1
                    case 2: p[i] ^= key.2
                    default: p[i] ^= key.3
                    }
                }
            }
        }
        readIndex += total
        return WebSocketFrame(fin: fin, opcode: opcode, payload: payload)
    }
}
