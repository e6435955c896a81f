/// One frame of an ARQ session, decoded: what a sealed transport packet carries (the packet's
/// header holds the connection id; docs/protocol.md 4.7 for the byte layout).
public struct Frame: Equatable, Sendable {
    public var kind: FrameKind
    /// Sender's clock in microseconds, truncated to 32 bits, strictly increasing per datagram:
    /// it names this datagram in the peer's echo.
    public var timestamp: UInt32
    /// The sender asks for an acknowledgement at once (probes, keepalives).
    public var ackNow: Bool
    public var ack: AckBlock?
    public var extensions: [FrameExtension]
    /// Ascending sequence numbers, at most `FrameCodec.maxSegmentsPerFrame`.
    public var segments: [Segment]

    public init(kind: FrameKind = .data, timestamp: UInt32, ackNow: Bool = false,
                ack: AckBlock? = nil, extensions: [FrameExtension] = [], segments: [Segment] = []) {
        self.kind = kind
        self.timestamp = timestamp
        self.ackNow = ackNow
        self.ack = ack
        self.extensions = extensions
        self.segments = segments
    }

    /// Frames the peer must acknowledge: they carry data or ask for it.
    public var isAckEliciting: Bool { ackNow || !segments.isEmpty }
}

public enum FrameKind: UInt8, Sendable {
    /// Segments and/or acknowledgements of one ARQ session.
    case data = 0
    /// The sender ends the session; the receiver stops retransmitting to it.
    case close = 1
}

/// What the receiver has: everything before `cumulative`, plus `ranges` above it.
public struct AckBlock: Equatable, Sendable {
    /// The next sequence number the receiver expects (all earlier ones arrived).
    public var cumulative: SequenceNumber
    /// The largest `timestamp` the receiver has seen from this sender.
    public var echoedTimestamp: UInt32
    /// How long the receiver held `echoedTimestamp` before this frame, in units of
    /// `FrameCodec.ackDelayUnitMicroseconds`.
    public var ackDelay: UInt32
    /// Segments the receiver will still accept from `cumulative` on (flow control).
    public var window: UInt32
    /// Received runs above `cumulative`, ascending, disjoint, not touching `cumulative`.
    public var ranges: [SequenceRange]

    public init(cumulative: SequenceNumber, echoedTimestamp: UInt32, ackDelay: UInt32, window: UInt32, ranges: [SequenceRange] = []) {
        self.cumulative = cumulative
        self.echoedTimestamp = echoedTimestamp
        self.ackDelay = ackDelay
        self.window = window
        self.ranges = ranges
    }
}

/// A run of `count` sequence numbers starting at `start` (count >= 1).
public struct SequenceRange: Equatable, Sendable, CustomStringConvertible {
    public var start: SequenceNumber
    public var count: UInt32
    public init(start: SequenceNumber, count: UInt32) {
        self.start = start
        self.count = count
    }
    /// One past the last number in the range.
    public var end: SequenceNumber { start.advanced(by: count) }
    public func contains(_ s: SequenceNumber) -> Bool {
        let d = start.distance(to: s)
        return d >= 0 && UInt32(d) < count
    }
    public var description: String { "\(start.rawValue)+\(count)" }
}

/// A piece of one message: messages longer than a segment are split, the last piece has `end`.
public struct Segment: Equatable, Sendable {
    public var sequence: SequenceNumber
    public var endOfMessage: Bool
    public var payload: [UInt8]
    public init(sequence: SequenceNumber, endOfMessage: Bool, payload: [UInt8]) {
        self.sequence = sequence
        self.endOfMessage = endOfMessage
        self.payload = payload
    }
}

/// A type-length-value field that peers which do not know `type` skip.
public struct FrameExtension: Equatable, Sendable {
    public var type: UInt64
    public var value: [UInt8]
    public init(type: UInt64, value: [UInt8]) {
        self.type = type
        self.value = value
    }

    /// Value: varint, microseconds. The longest the sender delays an acknowledgement.
    public static let maxAckDelayType: UInt64 = 1
}

/// Why bytes are not a valid frame. Decoding never traps.
public enum FrameError: Error, Equatable, Sendable {
    case truncated
    case tooLarge(Int)
    case varintOverflow
    case nonMinimalVarint
    case ackRangesWithoutAck
    case tooManyAckRanges(Int)
    case zeroAckRangeCount
    case invalidAckRange
    case extensionTooLarge(Int)
    case malformedExtension
    case tooManySegments
    case nonIncreasingSegment
    case segmentTooLarge(Int)
    /// A close frame carries nothing after its timestamp.
    case closeWithBody
}
