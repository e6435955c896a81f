/// Tunables of one ARQ session. Defaults suit a classroom Wi-Fi LAN and the sparse, small
/// batches of live drawing; every bound is named so memory stays bounded.
public struct ARQConfiguration: Sendable {
    /// Largest frame this end sends (bytes, at most `FrameCodec.maxFrameBytes`); sealed, its
    /// datagram is `PacketCodec.transportOverhead` (29) bytes more.
    public var maxDatagramSize = 1200
    /// Largest message `send` accepts; longer history is sent in several messages.
    public var maxMessageSize = 1 << 20
    /// Most segments in flight (sent, not yet cumulatively acknowledged). A lost segment holds
    /// the cumulative point for about two round trips (detection, then the retransmission's
    /// ack), so the window must cover that at bulk rate: at 5 % loss every window has holes,
    /// and 256 stalled a history sync behind each one (1M points, 20 ms RTT: 2-3 s).
    public var sendWindow: UInt32 = 1024
    /// Most segments this end buffers out of order; also the largest window it advertises.
    /// The ring grows to it only as segments arrive that far ahead (`ReceiveWindow`).
    public var receiveWindow: UInt32 = 1024
    /// Bytes delivered but not yet taken with `pollEvent`, plus the message being reassembled,
    /// above which the advertised window closes. At least `maxMessageSize`.
    public var maxPendingReceiveBytes = 2 << 20
    /// Bytes `send` may queue before they enter the send window; beyond it `send` throws.
    public var maxQueuedBytes = 4 << 20
    /// Messages `send` may queue before they enter the send window.
    public var maxQueuedMessages = 4096
    /// Longest this end holds back an acknowledgement (advertised to the peer).
    public var maxAckDelay = Instant.Duration.milliseconds(25)
    /// Unacknowledged ack-eliciting bytes received after which we acknowledge at once.
    public var immediateAckBytes = 2400
    /// SRTT assumed before the first sample.
    public var initialRTT = Instant.Duration.milliseconds(100)
    /// Lower bound of the retransmission timeout.
    public var minRTO = Instant.Duration.milliseconds(30)
    /// Upper bound of the retransmission timeout and of probe backoff.
    public var maxRTO = Instant.Duration.milliseconds(2000)
    /// A segment is lost when this many later datagrams were acknowledged (RFC 9002: 3).
    public var packetThreshold: UInt64 = 3
    /// Extra copies of each small recent segment sent along in later datagrams, so a single
    /// lost datagram is repaired by the next one instead of after a round trip.
    public var redundantCopies = 2
    /// Most bytes (payload plus segment header) of redundant copies per datagram.
    public var redundancyBytesPerDatagram = 128
    /// Sparse-traffic redundancy timer: when a datagram carrying new small segments is
    /// neither followed by another datagram nor acknowledged within `redundancyDelay`, send
    /// one datagram of redundant copies (same budget as piggybacked copies). Live batches are
    /// 60 ms apart, so without it two losses in a row wait two batches; it only runs while
    /// `lossEstimate` is above `redundancyLossThreshold`, so a clean link pays nothing.
    public var redundancyTimer = true
    /// Datagram loss estimate (parts per 65536, EWMA) above which the timer runs: 1 %.
    public var redundancyLossThreshold = 655
    /// Bounds of the timer delay, which is half the smoothed RTT: long enough that a burst
    /// loss rarely takes both copies, short enough to beat the next batch.
    public var minRedundancyDelay = Instant.Duration.milliseconds(5)
    public var maxRedundancyDelay = Instant.Duration.milliseconds(30)
    /// Send an ack-eliciting ping after this long without sending one.
    public var keepaliveInterval = Instant.Duration.milliseconds(5000)
    /// Report `.peerUnreachable` after this long without hearing from a peer we await.
    public var deadPeerTimeout = Instant.Duration.milliseconds(15000)
    /// First sequence number this end sends (tests start near the wrap).
    public var initialSequence = SequenceNumber(0)
    /// First sequence number expected from the peer.
    public var peerInitialSequence = SequenceNumber(0)

    public init() {}

    /// Bytes reserved in every frame for its header, the ack block with up to
    /// `maxAckRangesSent` ranges, extensions and one segment header (sized generously: it was
    /// set when frames also held a connection id and a checksum).
    static let headerReserve = 2 + 10 + 4 + (5 + 4 + 5 + 5 + 1 + ARQSession.maxAckRangesSent * 10) + 16 + 8 + 4

    /// Payload bytes per segment: a full segment always fits one datagram.
    public var maxSegmentPayload: Int { max(1, min(maxDatagramSize, FrameCodec.maxFrameBytes) - ARQConfiguration.headerReserve) }
}

/// What `pollEvent` reports.
public enum ARQEvent: Equatable, Sendable {
    /// One message, whole, in the order the peer sent it.
    case delivered([UInt8])
    /// Nothing heard from the peer for `deadPeerTimeout` while awaiting it.
    case peerUnreachable
    /// The peer was heard again after `.peerUnreachable`.
    case peerReachable
    /// The peer sent a `close` frame.
    case peerClosed
    /// The peer broke the protocol (e.g. a message above `maxMessageSize`); the session stops.
    case failed(ARQError)
}

public enum ARQError: Error, Equatable, Sendable {
    case messageTooLarge(size: Int, limit: Int)
    /// The send queue holds `maxQueuedBytes` or `maxQueuedMessages`: retry after acks drain it.
    case sendQueueFull
    case closed
    case peerMessageTooLarge
}

/// Counters and estimates, for tests, benchmarks and metrics.
public struct ARQStats: Equatable, Sendable {
    public var datagramsSent = 0
    public var bytesSent = 0
    public var datagramsReceived = 0
    public var bytesReceived = 0
    public var malformedDatagrams = 0
    public var messagesSent = 0
    public var messagesDelivered = 0
    /// Segments sent for the first time.
    public var segmentsSent = 0
    /// Segments sent again because they were declared lost or probed.
    public var retransmissions = 0
    /// Extra copies sent along proactively.
    public var redundantSegments = 0
    /// Datagrams of redundant copies sent by the sparse-traffic redundancy timer.
    public var redundancyTimerDatagrams = 0
    /// Estimated datagram loss toward the peer, parts per 65536 (see `ARQSession`).
    public var lossEstimate = 0
    public var pureAcksSent = 0
    public var probesSent = 0
    public var lossesDetected = 0
    public var duplicateSegmentsReceived = 0
    public var segmentsOutsideWindow = 0
    public var smoothedRTT = Instant.Duration.zero
    public var rttVariation = Instant.Duration.zero
    public var latestRTT = Instant.Duration.zero
    public var minRTT = Instant.Duration.zero
    public var congestionWindow = 0
    public var bytesInFlight = 0
    public var segmentsInFlight = 0
    public var queuedBytes = 0
    public var queuedMessages = 0
    /// Bytes received but not yet taken with `pollEvent` (out of order, reassembling, delivered).
    public var pendingReceiveBytes = 0
    public var outOfOrderSegments = 0
    public init() {}
}
