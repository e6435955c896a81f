/// The native TCP framing: each session message is `[u32 big-endian length][message]`.
/// TCP is reliable and ordered, so messages travel without ARQ.
struct StreamFrameDecoder {
    /// Bytes of the length prefix.
    static let headerBytes = 4

    enum Failure: Error, Equatable, CustomStringConvertible {
        case frameTooLarge(length: UInt32, limit: Int)
        var description: String {
            switch self {
            case .frameTooLarge(let length, let limit): "frame announces \(length) bytes, more than \(limit)"
            }
        }
    }

    /// Largest message accepted; a larger announced length is a protocol error (close).
    var maxFrameBytes: Int
    private var buffer: [UInt8] = []
    private var readIndex = 0

    init(maxFrameBytes: Int) { self.maxFrameBytes = maxFrameBytes }

    var bufferedByteCount: Int { buffer.count - readIndex }

    /// Adds received bytes. Memory stays within one frame plus one read: `pollFrame` must be
    /// drained after each call.
    mutating func handleBytes(_ bytes: UnsafeRawBufferPointer) {
        if readIndex > 0 && readIndex >= buffer.count / 2 {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, nil when more bytes are needed.
    mutating func pollFrame() throws(Failure) -> [UInt8]? {
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

    /// The wire bytes of one message.
    static func frame(_ message: [UInt8]) -> [UInt8] {
        let length = UInt32(truncatingIfNeeded: message.count)
        var out: [UInt8] = [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        out.append(contentsOf: message)
        return out
    }
}
