// Packs legacy frames into writes of exactly `LegacySessionLimits.chunkBytes`.
import InkCodec

/// Writes of exactly 1030 bytes, each holding whole frames only.
///
/// The app reads at most 1030 bytes a time (`HYSocket._readData`) and its receive routine
/// stores the byte after a complete frame twice when a read ends right after it, which breaks
/// the stream for good. If every write has exactly that size and reaches the app as one TCP
/// segment, every read the app makes is exactly one write, so no read ever ends inside a frame
/// (the daemon sends each chunk as its own segment: `TCPConnection.sendRecord`).
///
/// Each chunk starts with a heartbeat and is padded to size with heartbeats (an even gap up to
/// `heartbeatPaddingLimit`) or one filler frame whose text is zeros: the app logs and ignores
/// command 0. A frame is only added when the room it leaves can still be padded (never 1, 3 or
/// 5 bytes: a filler frame has at least 6, a heartbeat 2).
public struct LegacyChunkWriter: Sendable {
    public static let size = LegacySessionLimits.chunkBytes
    /// Gaps up to this size are filled with heartbeats (silent in the app); larger ones with one
    /// filler frame (one log line in the app, instead of hundreds of nested parses).
    public static let heartbeatPaddingLimit = 64
    /// Largest frame a chunk can hold after its leading heartbeat.
    public static let maxFrameBytes = size - 2

    private var chunk: [UInt8] = []

    public init() {}

    /// Bytes in the chunk under construction (0: none started).
    public var count: Int { chunk.count }
    public var isEmpty: Bool { chunk.isEmpty }

    /// Whether a frame of `bytes` fits in the current chunk (a new chunk holds any frame up to
    /// `maxFrameBytes`).
    public func fits(_ bytes: Int) -> Bool {
        let used = chunk.isEmpty ? 2 : chunk.count
        let left = LegacyChunkWriter.size - used - bytes
        return left == 0 || left == 2 || left == 4 || left >= 6
    }

    /// Adds one encoded frame; the caller checked `fits` (a frame that does not fit starts a new
    /// chunk, returned here as the finished previous one).
    public mutating func append(frame: [UInt8]) -> [UInt8]? {
        precondition(frame.count <= LegacyChunkWriter.maxFrameBytes, "legacy frame too large for a chunk")
        var finished: [UInt8]?
        if !chunk.isEmpty && !fits(frame.count) { finished = finish() }
        if chunk.isEmpty { LegacyFrame.heartbeat.append(to: &chunk) }
        chunk.append(contentsOf: frame)
        return finished
    }

    /// Pads and returns the chunk under construction (a bare heartbeat chunk when none was started).
    public mutating func finish() -> [UInt8] {
        if chunk.isEmpty { LegacyFrame.heartbeat.append(to: &chunk) }
        var out = chunk
        chunk = []
        LegacyChunkWriter.pad(&out)
        return out
    }

    /// Fills `bytes` up to `size` (its length is `size`, or `size - 2`, `- 4` or at most `- 6`).
    static func pad(_ bytes: inout [UInt8]) {
        let gap = size - bytes.count
        precondition(gap >= 0 && gap != 1 && gap != 3 && gap != 5, "chunk cannot be padded")
        if gap == 0 { return }
        if gap % 2 == 0 && gap <= heartbeatPaddingLimit {
            for _ in 0..<(gap / 2) { LegacyFrame.heartbeat.append(to: &bytes) }
            return
        }
        let filler = [UInt8](repeating: UInt8(ascii: "0"), count: gap - LegacyFrame.headerBytes)
        LegacyFrame.data(command: LegacyFrame.textCommand, payload: filler).append(to: &bytes)
    }
}
