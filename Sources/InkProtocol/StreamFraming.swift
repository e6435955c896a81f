/// The native TCP framing (docs/protocol.md 8.2): each session message is
/// `[u32 big-endian length][message]`. TCP is reliable and ordered, so messages travel without
/// ARQ. Shared by the daemon and clients (`InkClient`), so both ends frame alike.
public struct StreamFrameDecoder: Sendable {
    /// Bytes of the length prefix.
    public static let headerBytes = 4

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case frameTooLarge(length: UInt32, limit: Int)
        public var description: String {
            switch self {
            case .frameTooLarge(let length, let limit): "frame announces \(length) bytes, more than \(limit)"
            }
        }
    }

    /// Largest message accepted; a larger announced length is a protocol error (close).
    public var maxFrameBytes: Int
    private var buffer: [UInt8] = []
    private var readIndex = 0

    public init(maxFrameBytes: Int) { self.maxFrameBytes = maxFrameBytes }

    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Adds received bytes. Memory stays within one frame plus one read: `pollFrame` must be
    /// drained after each call.
    public mutating func handleBytes(_ bytes: UnsafeRawBufferPointer) {
        if readIndex > 0 && readIndex >= buffer.count / 2 {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, nil when more bytes are needed.
    public mutating func pollFrame() throws(Failure) -> [UInt8]? {
        guard bufferedByteCount >= StreamFrameDecoder.headerBytes else { return nil }
        var length: UInt32 = 0
        for i in 0..<4 { length = length << 8 | UInt32(buffer[readIndex + i]) }
        guard length <= UInt32(maxFrameBytes) else { throw .frameTooLarge(length: length, limit: maxFrameBytes) }
        let start = readIndex + StreamFrameDecoder.headerBytes
        let end = start + Int(length)
        guard end <= buffer.count else { return nil }
        readIndex = end
        return Array(buffer[start..<end])
    }

    /// Adds received bytes from an array (see `handleBytes(_:)` for a borrowed buffer).
    public mutating func handleBytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { handleBytes($0) }
    }

    /// The wire bytes of one message.
    public static func frame(_ message: [UInt8]) -> [UInt8] {
        let length = UInt32(truncatingIfNeeded: message.count)
        var out: [UInt8] = [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        out.append(contentsOf: message)
        return out
    }
}
