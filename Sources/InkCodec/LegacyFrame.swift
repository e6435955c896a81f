// HYWhiteboard's TCP framing: `[u16 BE command][u32 BE length][payload]`, and the bare
// two-byte heartbeat `27 11` (command 10001) that has no length field.

/// One unit of the legacy TCP stream.
public enum LegacyFrame: Hashable, Sendable {
    /// The bare bytes `27 11`, sent every 3 s by both ends.
    case heartbeat
    /// Any other command with its payload (101 text, 11 file chunk, others passed through).
    case data(command: UInt16, payload: [UInt8])

    /// Command of a text message (every whiteboard message).
    public static let textCommand: UInt16 = 101
    /// Command of an image file chunk (upload port).
    public static let fileChunkCommand: UInt16 = 11
    /// The heartbeat's command number; on the wire it is only these two bytes.
    public static let heartbeatCommand: UInt16 = 10001
    /// Bytes before the payload of a data frame.
    public static let headerBytes = 6
    /// Largest payload accepted. The app's text messages are under 64 bytes and its file
    /// chunks 1024; anything near this is a broken or hostile stream.
    public static let maxPayloadBytes = 64 * 1024

    /// A text frame carrying one legacy message.
    public static func text(_ message: LegacyMessage) -> LegacyFrame {
        .data(command: textCommand, payload: message.bytes)
    }

    /// Appends the frame's wire bytes. The caller keeps payloads within `maxPayloadBytes`
    /// (a peer's decoder rejects larger ones).
    public func append(to out: inout [UInt8]) {
        switch self {
        case .heartbeat:
            out.append(UInt8(LegacyFrame.heartbeatCommand >> 8))
            out.append(UInt8(LegacyFrame.heartbeatCommand & 0xff))
        case .data(let command, let payload):
            out.append(UInt8(command >> 8))
            out.append(UInt8(command & 0xff))
            let length = UInt32(truncatingIfNeeded: payload.count)
            for shift in [24, 16, 8, 0] as [UInt32] { out.append(UInt8(truncatingIfNeeded: length >> shift)) }
            out.append(contentsOf: payload)
        }
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        append(to: &out)
        return out
    }
}

/// Why the legacy byte stream cannot be decoded further. The stream has no resynchronisation
/// point, so the connection must be dropped.
public enum LegacyFrameError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A data frame announced more than `LegacyFrame.maxPayloadBytes`.
    case frameTooLarge(command: UInt16, length: UInt32)
    /// More than `LegacyFrameDecoder.maxBufferedBytes` were handed in without being polled out.
    case bufferOverflow(buffered: Int)

    public var description: String {
        switch self {
        case .frameTooLarge(let command, let length):
            "frame of command \(command) announces \(length) bytes, more than \(LegacyFrame.maxPayloadBytes)"
        case .bufferOverflow(let buffered): "\(buffered) bytes buffered, more than \(LegacyFrameDecoder.maxBufferedBytes)"
        }
    }
}

/// Incremental decoder of the legacy TCP stream. Feed every read with `handleBytes`, then call
/// `pollFrame` until it returns nil. Reads may split or merge frames anywhere (one byte at a
/// time, a frame plus one byte of the next, many frames at once); zero-length frames come out
/// as soon as their header is complete. After an error every call rethrows it.
public struct LegacyFrameDecoder: Sendable {
    /// Unparsed bytes held at most: one largest frame plus a generous read.
    public static let maxBufferedBytes = LegacyFrame.headerBytes + LegacyFrame.maxPayloadBytes + 256 * 1024

    private var buffer: [UInt8] = []
    private var readIndex = 0
    private var failure: LegacyFrameError?

    public init() {}

    /// Bytes received but not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    public mutating func handleBytes(_ bytes: some Collection<UInt8>) throws(LegacyFrameError) {
        if let failure { throw failure }
        let total = bufferedByteCount + bytes.count
        guard total <= LegacyFrameDecoder.maxBufferedBytes else {
            failure = .bufferOverflow(buffered: total)
            throw failure!
        }
        if readIndex > 0 && readIndex >= buffer.count / 2 {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, or nil when more bytes are needed.
    public mutating func pollFrame() throws(LegacyFrameError) -> LegacyFrame? {
        if let failure { throw failure }
        let available = bufferedByteCount
        guard available >= 2 else { return nil }
        let command = UInt16(buffer[readIndex]) << 8 | UInt16(buffer[readIndex + 1])
        if command == LegacyFrame.heartbeatCommand {
            readIndex += 2
            return .heartbeat
        }
        guard available >= LegacyFrame.headerBytes else { return nil }
        var length: UInt32 = 0
        for i in 2..<6 { length = length << 8 | UInt32(buffer[readIndex + i]) }
        guard length <= UInt32(LegacyFrame.maxPayloadBytes) else {
            failure = .frameTooLarge(command: command, length: length)
            throw failure!
        }
        let end = readIndex + LegacyFrame.headerBytes + Int(length)
        guard end <= buffer.count else { return nil }
        let payload = Array(buffer[(readIndex + LegacyFrame.headerBytes)..<end])
        readIndex = end
        return .data(command: command, payload: payload)
    }
}
