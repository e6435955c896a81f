/// A selective-repeat ARQ session over datagrams: reliable, in-order delivery of messages,
/// sans IO. See docs/protocol.md section 5.
///
/// Call order (the `DatagramEndpoint` contract): feed each received datagram to
/// `handleDatagram`; call `handleTimeout` when the deadline from `pollTimeout` passes (early
/// or twice is harmless); after any `handle…`, `send` or `pollEvent`, drain `pollTransmit`
/// until it returns nil, drain `pollEvent`, then re-arm the timer from `pollTimeout`.
///
/// It sees plaintext frames only: over the network, `SealedDatagramSession` opens each packet,
/// decodes its frame once and hands it to `handleFrame`, and seals what `pollTransmit` builds.
/// `handleDatagram` takes a frame's bytes directly (the simulator's unsealed runs, tests).
public final class ARQSession: DatagramEndpoint {
    /// Selective-ack ranges the header reserve counts on: the `lowestAckRangesSent` lowest
    /// (nearest the gap, where retransmissions land) and the newest for the rest. A frame with
    /// room to spare (a pure ack, a small message) carries up to `FrameCodec.maxAckRanges`: a
    /// receiver that takes a burst at once acknowledges it in one frame, and every range it
    /// leaves out is resent needlessly.
    public static let maxAckRangesSent = 8
    /// Of `maxAckRangesSent`, how many are the lowest ranges. The others are the newest: at
    /// 5 % loss a bulk window holds dozens of holes, and segments that arrived above the eighth
    /// range used never to be acknowledged, so the sender took them for lost (packet threshold)
    /// and sent them again: 400 spurious retransmissions in a 1M-point sync, counted as loss.
    public static let lowestAckRangesSent = 3
    /// Sent datagrams remembered to resolve echoed timestamps.
    public static let sentDatagramHistory = 1024
    /// Newest in-flight segments examined for redundant copies per datagram.
    public static let redundancyScanDepth = 32
    /// Bytes each delivered-but-untaken message is charged on top of its size, so a flood of
    /// empty messages also closes the receive window.
    public static let deliveredMessageOverhead = 16
    /// Scale of the datagram loss estimate (`ARQStats.lossEstimate`): 65536 is 100 %.
    public static let lossEstimateScale = 65536
    /// The loss estimate moves 1/2^shift of the way to each sample (1/16: about the last 16
    /// datagrams count).
    public static let lossEstimateShift = 4
    /// Slack beyond the peer's ack delay before an unechoed datagram counts as lost: timers
    /// fire late by a few milliseconds under load.
    public static let lossSampleMargin = Instant.Duration.milliseconds(5)
    /// Persistent congestion (RFC 9002 section 7.6) needs every ack-eliciting datagram lost
    /// over this many probe timeouts (without backoff): kPersistentCongestionThreshold.
    public static let persistentCongestionThreshold: UInt64 = 3
    /// Datagrams sent per probe timeout (RFC 9002 section 6.2.4 allows two): with one, a
    /// single lost probe or lost ack doubles the timeout, and at 10 % loss in each direction
    /// one probe round in five fails. Two fail together about one round in thirty.
    public static let probeDatagramsPerTimeout = 2

    public let configuration: ARQConfiguration

    // Send side.
    private var queue = SendQueue()
    private var ledger: SentLedger
    private var pendingRetransmits = 0
    private var bytesInFlight = 0
    private var congestion: CongestionController
    private var peerWindow: UInt32
    private var peerMaxAckDelay: Instant.Duration
    private var peerHasOurAckDelay = false
    private var rtt: RTTEstimator
    /// When the first RTT sample was taken: persistent congestion only counts datagrams sent
    /// after it (before it the probe timeout rests on `initialRTT`, a guess).
    private var firstRTTSampleAt: Instant?
    private var ptoCount = 0
    private var lastPTOAt: Instant?
    private var lossDeadline: Instant?
    private var largestAckedDatagram: UInt64?
    private var probePending = false
    /// Probe datagrams still to send for the last probe timeout (`probeDatagramsPerTimeout`).
    private var probesOwed = 0
    private var lastAckElicitingSentAt: Instant
    private var lastKeepaliveAt: Instant?
    /// Ping at the probe timeout even with nothing in flight, while the path layer says this
    /// end has not yet proved its address to the peer (`PathValidator`, docs/protocol.md 8.1).
    public var needsProof = false

    // Sent datagram history: datagram i at slot i % history.
    private var datagramCount: UInt64 = 0
    private var lastTimestamp: UInt32 = 0
    private var sentDatagrams: [SentDatagram]
    /// The newest entry of `sentDatagrams` again (its timestamp and send time; `acknowledged`
    /// is kept in the history only), in the session object: most acks echo it, and the
    /// history's slot was a cache miss per ack with thousands of sessions.
    private var newestSent = SentDatagram()

    // Sparse-traffic redundancy timer (see `ARQConfiguration.redundancyTimer`).
    private var lossEstimate = 0
    private var redundancyAt: Instant?
    private var redundancyDatagram: UInt64 = 0
    private var redundancyPending = false

    // Receive side.
    private var receiver: ReceiveWindow
    private var reassembly: [UInt8] = []
    private var pendingReceiveBytes = 0
    private var events: [ARQEvent] = []
    private var eventHead = 0
    private var hasReceived = false
    private var largestReceivedTimestamp: UInt32 = 0
    private var largestReceivedAt = Instant.zero
    private var ackPending = false
    private var ackDeadline: Instant?
    private var ackImmediately = false
    private var unackedElicitingBytes = 0
    private var lastAdvertisedWindow: UInt32

    // Liveness and lifecycle.
    private var lastReceivedAt: Instant
    private var reportedUnreachable = false
    private var failed = false
    private var closePending = false
    private var closed = false

    private var counters = ARQStats()

    public init(configuration: ARQConfiguration = .init(), now: Instant) {
        var config = configuration
        config.maxDatagramSize = min(max(config.maxDatagramSize, ARQConfiguration.headerReserve + 16), FrameCodec.maxFrameBytes)
        config.sendWindow = min(max(config.sendWindow, 1), 1 << 20)
        config.receiveWindow = min(max(config.receiveWindow, 1), 1 << 20)
        config.maxPendingReceiveBytes = max(config.maxPendingReceiveBytes, config.maxMessageSize + 2 * config.maxSegmentPayload)
        self.configuration = config
        self.ledger = SentLedger(base: config.initialSequence)
        self.congestion = CongestionController(segmentSize: config.maxSegmentPayload)
        self.peerWindow = config.receiveWindow
        self.peerMaxAckDelay = config.maxAckDelay
        self.rtt = RTTEstimator(initial: config.initialRTT)
        self.lastAckElicitingSentAt = now
        self.sentDatagrams = Array(repeating: SentDatagram(), count: ARQSession.sentDatagramHistory)
        self.receiver = ReceiveWindow(capacity: Int(config.receiveWindow), next: config.peerInitialSequence)
        self.lastAdvertisedWindow = config.receiveWindow
        self.lastReceivedAt = now
    }

    // MARK: Application interface

    /// Queues one message for reliable, in-order delivery. It goes out on the next
    /// `pollTransmit`, together with anything else queued by then.
    public func send(_ batch: [UInt8]) throws(ARQError) {
        guard !failed, !closed, !closePending else { throw .closed }
        guard batch.count <= configuration.maxMessageSize else {
            throw .messageTooLarge(size: batch.count, limit: configuration.maxMessageSize)
        }
        guard queue.messageCount < configuration.maxQueuedMessages,
              queue.queuedBytes + batch.count <= configuration.maxQueuedBytes else { throw .sendQueueFull }
        queue.push(batch)
        counters.messagesSent += 1
    }

    /// Next event: delivered messages strictly in the peer's order, and peer state changes.
    public func pollEvent() -> ARQEvent? {
        guard eventHead < events.count else { return nil }
        let event = events[eventHead]
        eventHead += 1
        if eventHead == events.count {
            // The shared empty array, not a kept buffer: this is read after every datagram
            // (see `SendQueue.popSegment`).
            events = []
            eventHead = 0
        }
        if case .delivered(let message) = event {
            pendingReceiveBytes -= message.count + ARQSession.deliveredMessageOverhead
            // Reopen a window we had shrunk: tell the peer at once.
            if hasReceived && lastAdvertisedWindow < configuration.receiveWindow / 2
                && advertisedWindow() >= configuration.receiveWindow / 2 {
                ackPending = true
                ackImmediately = true
            }
        }
        return event
    }

    /// Sends a `close` frame with the next `pollTransmit` and stops the session.
    public func close() {
        guard !closed, !failed else { return }
        closePending = true
    }

    public var stats: ARQStats {
        var s = counters
        s.smoothedRTT = rtt.smoothed
        s.rttVariation = rtt.variation
        s.latestRTT = rtt.latest
        s.minRTT = rtt.minimum ?? .zero
        s.congestionWindow = congestion.window
        s.bytesInFlight = bytesInFlight
        s.segmentsInFlight = ledger.count
        s.queuedBytes = queue.queuedBytes
        s.queuedMessages = queue.messageCount
        s.pendingReceiveBytes = pendingReceiveBytes
        s.lossEstimate = lossEstimate
        s.outOfOrderSegments = receiver.outOfOrder.ranges.reduce(0) { $0 + Int($1.count) }
        return s
    }

    /// Bytes queued and not yet cut into segments (`stats.queuedBytes`, without building the
    /// whole statistics).
    public var queuedBytes: Int { queue.queuedBytes }

    /// `stats.smoothedRTT`, `stats.lossEstimate`, `stats.retransmissions` and
    /// `stats.outOfOrderSegments` one at a time: a daemon samples them for every session each
    /// second (and the status page for every member), and building the whole statistics for
    /// thousands of sessions showed in its profile.
    public var smoothedRTT: Instant.Duration { rtt.smoothed }
    public var estimatedLoss: Int { lossEstimate }
    public var retransmissions: Int { counters.retransmissions }
    public var outOfOrderSegments: Int { receiver.outOfOrder.ranges.reduce(0) { $0 + Int($1.count) } }

    /// True when everything sent has been acknowledged and nothing is queued.
    public var isIdle: Bool { ledger.isEmpty && queue.isEmpty }

    /// The timestamp of the last datagram `pollTransmit` or `pollProbe` built (it names that
    /// datagram in the peer's echo: path validation).
    public var newestSentTimestamp: UInt32 { lastTimestamp }

    /// Sends an ACK_NOW ping with the next `pollTransmit` (a device confirming its handshake).
    public func requestPing() {
        guard !failed, !closed else { return }
        probePending = true
    }

    // MARK: DatagramEndpoint

    public func handleDatagram(_ datagram: [UInt8], now: Instant) {
        datagram.withUnsafeBytes { handleDatagram($0, now: now) }
    }

    /// `handleDatagram` of borrowed memory (a frame's bytes): nothing is copied but the segment
    /// payloads kept for delivery, so a frame of acknowledgements alone allocates nothing.
    public func handleDatagram(_ datagram: UnsafeRawBufferPointer, now: Instant) {
        let frame: Frame
        do { frame = try FrameCodec.decode(datagram) } catch {
            counters.datagramsReceived += 1
            counters.bytesReceived += datagram.count
            counters.malformedDatagrams += 1
            return
        }
        handleFrame(frame, datagramBytes: datagram.count, now: now)
    }

    /// One frame, already decoded (and authenticated) by the layer below; `datagramBytes` is
    /// what the datagram weighed on the wire (statistics, the immediate-ack threshold).
    public func handleFrame(_ frame: Frame, datagramBytes: Int, now: Instant) {
        counters.datagramsReceived += 1
        counters.bytesReceived += datagramBytes
        guard !failed, !closed else { return }
        lastReceivedAt = now
        if reportedUnreachable {
            reportedUnreachable = false
            events.append(.peerReachable)
        }
        if frame.kind == .close {
            closed = true
            events.append(.peerClosed)
            return
        }
        var isNewest = false
        if !hasReceived || SequenceNumber.distance(from: largestReceivedTimestamp, to: frame.timestamp) > 0 {
            hasReceived = true
            largestReceivedTimestamp = frame.timestamp
            largestReceivedAt = now
            isNewest = true
        }
        for x in frame.extensions where x.type == FrameExtension.maxAckDelayType {
            let value = x.value.withUnsafeBytes { raw in
                var r = ByteReader(raw, end: raw.count)
                return try? r.readVarint()
            }
            if let micros = value {
                peerMaxAckDelay = min(Instant.Duration(microseconds: micros), configuration.maxRTO)
            }
        }
        if let ack = frame.ack { process(ack, isNewest: isNewest, now: now) }
        for segment in frame.segments {
            receive(segment)
            if failed { return }
        }
        if frame.isAckEliciting {
            if !ackPending { ackDeadline = now + configuration.maxAckDelay }
            ackPending = true
            unackedElicitingBytes += datagramBytes
            if frame.ackNow || unackedElicitingBytes >= configuration.immediateAckBytes { ackImmediately = true }
        }
    }

    public func handleTimeout(now: Instant) {
        guard !failed, !closed else { return }
        if ackPending, let d = ackDeadline, !(now < d) { ackImmediately = true }
        if let l = lossDeadline, !(now < l) { detectLosses(now: now) }
        if let p = probeDeadline(), !(now < p) { firePTO(now: now) }
        if let r = redundancyDeadline(), !(now < r) {
            redundancyAt = nil
            redundancyPending = true
        }
        if let k = keepaliveDeadline(), !(now < k) {
            lastKeepaliveAt = now
            probePending = true
        }
        if let d = deadPeerDeadline(), !(now < d) {
            reportedUnreachable = true
            events.append(.peerUnreachable)
        }
    }

    public func pollTimeout() -> Instant? {
        guard !failed, !closed else { return nil }
        var next: Instant?
        func consider(_ t: Instant?) {
            guard let t else { return }
            if let n = next { next = min(n, t) } else { next = t }
        }
        if ackPending { consider(ackDeadline) }
        consider(lossDeadline)
        consider(probeDeadline())
        consider(redundancyDeadline())
        consider(keepaliveDeadline())
        consider(deadPeerDeadline())
        return next
    }

    public func pollTransmit(now: Instant) -> [UInt8]? { pollTransmit(now: now, headroom: 0, tailroom: 0) }

    /// `pollTransmit` into a buffer with `headroom` bytes reserved in front of the frame and
    /// capacity for `tailroom` more behind it (a sealer's header and tag).
    public func pollTransmit(now: Instant, headroom: Int, tailroom: Int) -> [UInt8]? {
        guard !failed, !closed else { return nil }
        if closePending {
            closePending = false
            closed = true
            return emit(Frame(kind: .close, timestamp: nextTimestamp(now)), now: now, headroom: headroom, tailroom: tailroom)
        }
        // Nothing to retransmit, queue, probe or acknowledge: no frame (the last call of every
        // drain; building and encoding a frame only to drop it cost the daemon per datagram).
        let ackDue = ackPending && (ackImmediately || (ackDeadline.map { !(now < $0) } ?? false))
        // The second probe of a timeout carries the oldest segments again (or is a ping).
        if probesOwed > 0 && pendingRetransmits == 0 && !probePending && !markOldestForProbe() { probePending = true }
        let isProbe = probesOwed > 0
        if pendingRetransmits == 0 && queue.isEmpty && !probePending && !ackDue && !redundancyPending { return nil }
        // The ledger offsets a frame carries, on the stack: an array for them was one more
        // allocation and release for every datagram sent.
        return withUnsafeTemporaryAllocation(of: Int32.self, capacity: FrameCodec.maxSegmentsPerFrame) { buffer in
            var chosen = ChosenSegments(buffer)
            return transmitFrame(now: now, ackDue: ackDue, isProbe: isProbe, chosen: &chosen, headroom: headroom, tailroom: tailroom)
        }
    }

    /// A bare ACK_NOW ping built now, whatever else is due (it goes to another path: the path
    /// layer probes a candidate address with it and watches for the echo of its timestamp).
    public func pollProbe(now: Instant, headroom: Int = 0, tailroom: Int = 0) -> [UInt8]? {
        guard !failed, !closed else { return nil }
        counters.probesSent += 1
        let frame = Frame(timestamp: nextTimestamp(now), ackNow: true)
        lastAckElicitingSentAt = now
        return emit(frame, now: now, headroom: headroom, tailroom: tailroom)
    }

    /// The body of `pollTransmit` once something may go: builds the frame and emits it, or
    /// returns nil when there is nothing to send after all.
    private func transmitFrame(now: Instant, ackDue: Bool, isProbe: Bool, chosen: inout ChosenSegments,
                               headroom: Int, tailroom: Int) -> [UInt8]? {
        var frame = Frame(timestamp: 0)
        if hasReceived { frame.ack = makeAck(now: now) }
        if !peerHasOurAckDelay {
            var v = ByteWriter()
            v.writeVarint(configuration.maxAckDelay.microseconds)
            frame.extensions = [FrameExtension(type: FrameExtension.maxAckDelayType, value: v.bytes)]
        }
        var budget = configuration.maxDatagramSize - FrameCodec.encodedSize(of: frame)
        var probing = false
        var carriedNew = false

        // 1. Segments declared lost or probed, oldest first.
        if pendingRetransmits > 0 {
            for i in 0..<ledger.count where ledger[i].needsRetransmit && chosen.count < FrameCodec.maxSegmentsPerFrame {
                let cost = FrameCodec.segmentOverhead(payloadCount: ledger[i].payload.count) + ledger[i].payload.count
                guard cost <= budget else { break }
                budget -= cost
                ledger[i].needsRetransmit = false
                pendingRetransmits -= 1
                counters.retransmissions += 1
                chosen.append(i)
                probing = probing || ptoCount > 0
            }
        }
        // 2. New data, within the send window, the peer's window and the congestion window.
        let windowLimit = Int(min(configuration.sendWindow, peerWindow))
        while chosen.count < FrameCodec.maxSegmentsPerFrame, ledger.count < windowLimit,
              let size = queue.nextSegmentSize(maxPayload: configuration.maxSegmentPayload),
              // A probe is never blocked by the congestion controller (RFC 9002 section 7.5):
              // queued batches ride along instead of waiting out the backoff.
              isProbe || congestion.allows(bytesInFlight: bytesInFlight, adding: size) {
            let cost = FrameCodec.segmentOverhead(payloadCount: size) + size
            guard cost <= budget else { break }
            budget -= cost
            guard let piece = queue.popSegment(maxPayload: configuration.maxSegmentPayload) else { break }
            ledger.append(SentSegment(payload: piece.payload, endOfMessage: piece.endOfMessage,
                                      lastSentAt: now, lastSentDatagram: datagramCount))
            bytesInFlight += piece.payload.count
            counters.segmentsSent += 1
            chosen.append(ledger.count - 1)
            carriedNew = true
        }
        // 3. Redundant copies of recent small unacknowledged segments, newest first. The
        // redundancy timer sends them alone, past the per-segment copy count (once per send).
        let timerCopy = redundancyPending
        redundancyPending = false
        if (!chosen.isEmpty || timerCopy) && configuration.redundantCopies > 0 {
            var spare = min(budget, configuration.redundancyBytesPerDatagram)
            let lowest = max(0, ledger.count - ARQSession.redundancyScanDepth)
            var i = ledger.count - 1
            while i >= lowest && chosen.count < FrameCodec.maxSegmentsPerFrame {
                let e = ledger[i]
                if !e.acked && (e.redundantCopies < configuration.redundantCopies || timerCopy) && !chosen.contains(i) {
                    let cost = FrameCodec.segmentOverhead(payloadCount: e.payload.count) + e.payload.count
                    if cost <= spare {
                        spare -= cost
                        ledger[i].redundantCopies += 1
                        counters.redundantSegments += 1
                        chosen.append(i)
                    }
                }
                i -= 1
            }
        }

        guard !chosen.isEmpty || ackDue || probePending else { return nil }
        if chosen.isEmpty && !probePending { counters.pureAcksSent += 1 }
        if timerCopy && !chosen.isEmpty && !carriedNew { counters.redundancyTimerDatagrams += 1 }
        if probePending || probing || isProbe {
            frame.ackNow = true
            if probePending { counters.probesSent += 1 }
            probePending = false
        }
        // Every call while a probe is owed sends one (it marks segments or a ping above).
        if isProbe { probesOwed -= 1 }
        chosen.sort()
        let index = datagramCount
        if carriedNew && configuration.redundancyTimer {
            redundancyAt = now + redundancyDelay()
            redundancyDatagram = index
        }
        frame.segments.reserveCapacity(chosen.count)
        for i in chosen.offsets {
            ledger[i].lastSentAt = now
            ledger[i].lastSentDatagram = index
            let e = ledger[i]
            frame.segments.append(Segment(sequence: ledger.base.advanced(by: UInt32(i)), endOfMessage: e.endOfMessage, payload: e.payload))
        }
        frame.timestamp = nextTimestamp(now)
        if frame.isAckEliciting { lastAckElicitingSentAt = now }
        if frame.ack != nil, receiver.outOfOrder.ranges.count > ARQSession.maxAckRangesSent {
            var wide = frame
            wide.ack?.ranges = ackRanges(limit: FrameCodec.maxAckRanges)
            if FrameCodec.encodedSize(of: wide) <= configuration.maxDatagramSize { frame = wide }
        }
        return emit(frame, now: now, headroom: headroom, tailroom: tailroom)
    }

    // MARK: Sending helpers

    private func nextTimestamp(_ now: Instant) -> UInt32 {
        var ts = UInt32(truncatingIfNeeded: now.microseconds)
        if datagramCount > 0 && SequenceNumber.distance(from: lastTimestamp, to: ts) <= 0 { ts = lastTimestamp &+ 1 }
        return ts
    }

    private func emit(_ frame: Frame, now: Instant, headroom: Int, tailroom: Int) -> [UInt8] {
        let bytes = FrameCodec.encode(frame, headroom: headroom, tailroom: tailroom)
        let slot = Int(datagramCount % UInt64(ARQSession.sentDatagramHistory))
        newestSent = SentDatagram(timestamp: frame.timestamp, elicits: frame.isAckEliciting, at: now)
        sentDatagrams[slot] = newestSent
        lastTimestamp = frame.timestamp
        datagramCount += 1
        counters.datagramsSent += 1
        counters.bytesSent += bytes.count - headroom
        if let ack = frame.ack {
            lastAdvertisedWindow = ack.window
            ackPending = false
            ackImmediately = false
            ackDeadline = nil
            unackedElicitingBytes = 0
        }
        return bytes
    }

    private func advertisedWindow() -> UInt32 {
        let free = configuration.maxPendingReceiveBytes - pendingReceiveBytes
        let bySpace = max(0, free / configuration.maxSegmentPayload - 1)
        return UInt32(min(Int(configuration.receiveWindow), bySpace))
    }

    private func makeAck(now: Instant) -> AckBlock {
        let held = now.since(largestReceivedAt).microseconds / FrameCodec.ackDelayUnitMicroseconds
        let window = advertisedWindow()
        return AckBlock(cumulative: receiver.next, echoedTimestamp: largestReceivedTimestamp,
                        ackDelay: UInt32(min(held, UInt64(UInt32.max))), window: window,
                        ranges: ackRanges())
    }

    /// The ranges one ack reports, ascending: all when they fit, else the lowest few and the
    /// newest (see `lowestAckRangesSent`).
    private func ackRanges(limit: Int = ARQSession.maxAckRangesSent) -> [SequenceRange] {
        let all = receiver.outOfOrder.ranges
        guard all.count > limit else { return all }
        let newest = limit - ARQSession.lowestAckRangesSent
        return Array(all.prefix(ARQSession.lowestAckRangesSent)) + Array(all.suffix(newest))
    }

    // MARK: Acknowledgements and loss recovery

    /// Local index and send time of the datagram that carried `timestamp`, if remembered.
    private func sentDatagram(withTimestamp timestamp: UInt32) -> (index: UInt64, at: Instant)? {
        guard datagramCount > 0 else { return nil }
        let history = UInt64(ARQSession.sentDatagramHistory)
        var lo = datagramCount > history ? datagramCount - history : 0
        var hi = datagramCount - 1
        // Most acks echo the newest datagram: its copy in the session, not a search across the
        // history (each probe a cache miss with thousands of sessions).
        if newestSent.timestamp == timestamp { return (hi, newestSent.at) }
        let oldest = sentDatagrams[Int(lo % history)].timestamp
        let target = SequenceNumber.distance(from: oldest, to: timestamp)
        guard target >= 0 else { return nil }
        while lo <= hi {
            let mid = lo + (hi - lo) / 2
            let d = SequenceNumber.distance(from: oldest, to: sentDatagrams[Int(mid % history)].timestamp)
            if d == target { return (mid, sentDatagrams[Int(mid % history)].at) }
            if d < target { lo = mid + 1 } else {
                if mid == 0 { break }
                hi = mid - 1
            }
        }
        return nil
    }

    private func process(_ ack: AckBlock, isNewest: Bool, now: Instant) {
        peerHasOurAckDelay = true
        let cumulative = ledger.base.distance(to: ack.cumulative)
        // An ack for numbers never sent is not believable: ignore the whole block.
        guard Int(cumulative) <= ledger.count else { return }
        var newlyAcked = 0
        let inFlightBefore = bytesInFlight
        func markAcked(_ i: Int) {
            guard !ledger[i].acked else { return }
            ledger[i].acked = true
            if ledger[i].needsRetransmit {
                ledger[i].needsRetransmit = false
                pendingRetransmits -= 1
            }
            bytesInFlight -= ledger[i].payload.count
            markAcknowledged(datagram: ledger[i].lastSentDatagram)
            congestion.onAck(bytes: ledger[i].payload.count, sentAt: ledger[i].lastSentAt, bytesInFlightBefore: inFlightBefore)
            newlyAcked += 1
        }
        if cumulative > 0 {
            for i in 0..<Int(cumulative) { markAcked(i) }
        }
        for range in ack.ranges {
            let from = ledger.base.distance(to: range.start)
            let lower = max(0, Int(from))
            let upper = min(ledger.count, Int(from) + Int(min(range.count, UInt32(Int32.max))))
            if lower < upper { for i in lower..<upper { markAcked(i) } }
        }
        ledger.popAcked()
        if isNewest { peerWindow = ack.window }

        var newLargest = false
        if let sent = sentDatagram(withTimestamp: ack.echoedTimestamp),
           largestAckedDatagram.map({ sent.index > $0 }) ?? true {
            sampleLoss(previous: largestAckedDatagram, echoed: sent.index, echoedAt: sent.at)
            largestAckedDatagram = sent.index
            markAcknowledged(datagram: sent.index)
            if sent.index >= redundancyDatagram { redundancyAt = nil }
            newLargest = true
            let raw = now.since(sent.at)
            let reported = Instant.Duration(microseconds: UInt64(ack.ackDelay) * FrameCodec.ackDelayUnitMicroseconds)
            let delay = min(reported, peerMaxAckDelay)
            var sample = raw
            if let m = rtt.minimum, raw.microseconds >= m.microseconds + delay.microseconds {
                sample = Instant.Duration(microseconds: raw.microseconds - delay.microseconds)
            } else if rtt.minimum == nil, raw.microseconds > delay.microseconds {
                sample = Instant.Duration(microseconds: raw.microseconds - delay.microseconds)
            }
            rtt.add(sample: sample)
            if firstRTTSampleAt == nil { firstRTTSampleAt = now }
        }
        if newlyAcked > 0 || newLargest {
            ptoCount = 0
            lastPTOAt = nil
            probesOwed = 0
        }
        detectLosses(now: now)
    }

    /// RFC 9002 loss detection: a segment is lost once a datagram sent after its last
    /// transmission was acknowledged and either `packetThreshold` such datagrams were, or
    /// the time threshold (9/8 RTT) has passed since it was sent.
    private func detectLosses(now: Instant) {
        lossDeadline = nil
        guard let largest = largestAckedDatagram else { return }
        let delay = rtt.lossDelay
        var lostDatagrams: ClosedRange<UInt64>?
        for i in 0..<ledger.count {
            let e = ledger[i]
            guard !e.acked, !e.needsRetransmit, e.lastSentDatagram < largest else { continue }
            if largest - e.lastSentDatagram >= configuration.packetThreshold || !(now < e.lastSentAt + delay) {
                ledger[i].needsRetransmit = true
                pendingRetransmits += 1
                counters.lossesDetected += 1
                congestion.onLoss(bytes: e.payload.count, sentAt: e.lastSentAt, now: now)
                let d = e.lastSentDatagram
                lostDatagrams = lostDatagrams.map { min($0.lowerBound, d)...max($0.upperBound, d) } ?? d...d
            } else {
                let t = e.lastSentAt + delay
                lossDeadline = lossDeadline.map { min($0, t) } ?? t
            }
        }
        if let lost = lostDatagrams, isPersistentCongestion(lost: lost, largestAcked: largest, lossDelay: delay, now: now) { congestion.onPersistentCongestion(now: now) }
    }

    /// RFC 9002 section 7.6: the ack-eliciting datagrams just declared lost span more than
    /// `persistentCongestionThreshold` probe timeouts, the first was sent after the first RTT
    /// sample, and none sent in between is known to have arrived. Only losses declared from
    /// acknowledgements count, never a probe timeout: a delay spike fires the probe timeout too
    /// though nothing is lost (two timeouts used to collapse the window, and live drawing, being
    /// app-limited, never grew it back: multi-second stalls in the loss benchmark).
    private func isPersistentCongestion(lost: ClosedRange<UInt64>, largestAcked: UInt64, lossDelay: Instant.Duration, now: Instant) -> Bool {
        let history = UInt64(ARQSession.sentDatagramHistory)
        guard let sampled = firstRTTSampleAt, datagramCount - lost.lowerBound <= history else { return false }
        func datagram(_ i: UInt64) -> SentDatagram { sentDatagrams[Int(i % history)] }
        let first = datagram(lost.lowerBound).at
        guard sampled < first else { return false }
        for i in lost where datagram(i).elicits && datagram(i).acknowledged { return false }
        // A probe resends the oldest segments, so a lost probe never shows as a lost segment
        // (its segments are acknowledged through the probe that got through): the run goes on
        // over the unacknowledged ack-eliciting datagrams after it that are past the loss
        // thresholds too, as lost packets would be in QUIC.
        var last = datagram(lost.upperBound).at
        var i = lost.upperBound + 1
        while i < largestAcked {
            let d = datagram(i)
            if d.elicits {
                guard !d.acknowledged, largestAcked - i >= configuration.packetThreshold || !(now < d.at + lossDelay) else { break }
                last = d.at
            }
            i += 1
        }
        let pto = rtt.smoothed + max(RTTEstimator.granularity, rtt.variation * 4) + peerMaxAckDelay
        return pto * ARQSession.persistentCongestionThreshold < last.since(first)
    }

    /// Records that datagram `index` arrived (an acknowledged segment was last sent in it, or
    /// the peer echoed it), for `isPersistentCongestion`.
    private func markAcknowledged(datagram index: UInt64) {
        let history = UInt64(ARQSession.sentDatagramHistory)
        guard index < datagramCount, datagramCount - index <= history else { return }
        sentDatagrams[Int(index % history)].acknowledged = true
    }

    /// Datagram loss estimate from echoed timestamps. The peer acknowledges within its ack
    /// delay and echoes the newest datagram it holds, so an ack-eliciting datagram sent more
    /// than that delay before the newly echoed one and never echoed itself was lost (or its
    /// ack was): sparse live batches are measured, closer datagrams whose acks merge are not.
    /// Losses repaired by redundant copies count too, which loss detection never sees.
    private func sampleLoss(previous: UInt64?, echoed: UInt64, echoedAt: Instant) {
        let history = UInt64(ARQSession.sentDatagramHistory)
        let shift = ARQSession.lossEstimateShift
        let oldest = datagramCount > history ? datagramCount - history : 0
        var i = max(previous.map { $0 + 1 } ?? echoed, oldest)
        let gap = peerMaxAckDelay + ARQSession.lossSampleMargin
        while i < echoed {
            let slot = Int(i % history)
            if sentDatagrams[slot].elicits && sentDatagrams[slot].at + gap < echoedAt {
                lossEstimate += (ARQSession.lossEstimateScale - lossEstimate) >> shift
            }
            i += 1
        }
        lossEstimate -= lossEstimate >> shift
    }

    /// Half the smoothed RTT, within the configured bounds.
    private func redundancyDelay() -> Instant.Duration {
        let half = Instant.Duration(microseconds: rtt.smoothed.microseconds / 2)
        return min(max(half, configuration.minRedundancyDelay), configuration.maxRedundancyDelay)
    }

    /// When the redundancy timer fires: armed by the last datagram with new data, while that
    /// datagram is unacknowledged, something is in flight and the link is lossy.
    private func redundancyDeadline() -> Instant? {
        guard let at = redundancyAt, !ledger.isEmpty, ledger.count > pendingRetransmits,
              lossEstimate > configuration.redundancyLossThreshold else { return nil }
        return at
    }

    /// The probe timeout: RTO plus the peer's ack delay, doubled per unanswered probe, capped.
    private func probeDeadline() -> Instant? {
        let blocked = ledger.isEmpty && !queue.isEmpty
        let proving = needsProof
        guard (!ledger.isEmpty && pendingRetransmits < ledger.count) || blocked || proving else { return nil }
        let base = rtt.retransmissionTimeout(floor: configuration.minRTO, ceiling: configuration.maxRTO) + peerMaxAckDelay
        let backedOff = base.microseconds << UInt64(min(ptoCount, 16))
        let timeout = Instant.Duration(microseconds: min(backedOff, configuration.maxRTO.microseconds))
        var from = lastAckElicitingSentAt
        if let p = lastPTOAt, from < p { from = p }
        return from + timeout
    }

    /// Tail-loss probe: the next `probeDatagramsPerTimeout` datagrams each resend the oldest
    /// unacknowledged segments (one datagram's worth), or are pings when nothing is in flight;
    /// then back off.
    private func firePTO(now: Instant) {
        ptoCount += 1
        lastPTOAt = now
        // A probe timeout is not a loss (RFC 9002 section 6.2): the window is left alone here;
        // an outage shows as persistent congestion once acknowledgements return (`detectLosses`).
        probesOwed = ARQSession.probeDatagramsPerTimeout
        if !markOldestForProbe() { probePending = true }
    }

    /// Marks the oldest unacknowledged segments, one datagram's worth, for retransmission;
    /// false when nothing is in flight.
    private func markOldestForProbe() -> Bool {
        var budget = configuration.maxDatagramSize - ARQConfiguration.headerReserve
        var marked = false
        for i in 0..<ledger.count where !ledger[i].acked {
            let cost = FrameCodec.segmentOverhead(payloadCount: ledger[i].payload.count) + ledger[i].payload.count
            if marked && cost > budget { break }
            budget -= cost
            marked = true
            if !ledger[i].needsRetransmit {
                ledger[i].needsRetransmit = true
                pendingRetransmits += 1
            }
        }
        return marked
    }

    private func keepaliveDeadline() -> Instant? {
        guard ledger.isEmpty, queue.isEmpty else { return nil }
        var from = lastAckElicitingSentAt
        if let k = lastKeepaliveAt, from < k { from = k }
        return from + configuration.keepaliveInterval
    }

    private func deadPeerDeadline() -> Instant? {
        guard !reportedUnreachable, lastReceivedAt < lastAckElicitingSentAt || probePending || !ledger.isEmpty else { return nil }
        return lastReceivedAt + configuration.deadPeerTimeout
    }

    // MARK: Receiving

    private func receive(_ segment: Segment) {
        let hadGap = !receiver.outOfOrder.isEmpty
        switch receiver.store(segment, window: Int(advertisedWindow())) {
        case .duplicate:
            counters.duplicateSegmentsReceived += 1
            return
        case .outsideWindow:
            counters.segmentsOutsideWindow += 1
            return
        case .stored(let gap):
            pendingReceiveBytes += segment.payload.count
            if gap {
                ackImmediately = true
                return
            }
        }
        while let piece = receiver.popInOrder() {
            reassembly.append(contentsOf: piece.payload)
            if reassembly.count > configuration.maxMessageSize {
                failed = true
                events.append(.failed(.peerMessageTooLarge))
                return
            }
            if piece.end {
                events.append(.delivered(reassembly))
                pendingReceiveBytes += ARQSession.deliveredMessageOverhead
                counters.messagesDelivered += 1
                reassembly = []
            }
        }
        if hadGap { ackImmediately = true }
    }
}

/// One remembered sent datagram. One array of these, not one per field: recording a datagram
/// writes one slot (one uniqueness check, one cache line) where three arrays took three of each.
struct SentDatagram {
    var timestamp: UInt32 = 0
    /// It asked for an acknowledgement (loss estimate).
    var elicits = false
    /// Known to have arrived (persistent congestion needs a run with none of these). Beside
    /// `elicits`, in the padding before `at`: after `at` it made the record 24 bytes instead
    /// of 16, 8 KB more per session (the history has 1024), +16 MB RSS at 2000 sessions.
    var acknowledged = false
    var at = Instant.zero
}

/// The ledger offsets one frame carries, in caller-provided memory of
/// `FrameCodec.maxSegmentsPerFrame` entries (`pollTransmit` keeps it on the stack).
struct ChosenSegments {
    private let storage: UnsafeMutableBufferPointer<Int32>
    private(set) var count = 0

    init(_ storage: UnsafeMutableBufferPointer<Int32>) { self.storage = storage }

    var isEmpty: Bool { count == 0 }

    /// Adds an offset (the caller keeps `count` below `FrameCodec.maxSegmentsPerFrame`).
    mutating func append(_ offset: Int) {
        storage[count] = Int32(offset)
        count += 1
    }

    func contains(_ offset: Int) -> Bool {
        let value = Int32(offset)
        for k in 0..<count where storage[k] == value { return true }
        return false
    }

    /// Ascending, as the frame's segments must be.
    mutating func sort() {
        var prefix = UnsafeMutableBufferPointer(rebasing: storage[0..<count])
        prefix.sort()
    }

    /// The offsets in their current order.
    var offsets: LazyMapSequence<Range<Int>, Int> {
        let storage = self.storage
        return (0..<count).lazy.map { Int(storage[$0]) }
    }
}
