import InkProtocol

/// The ARQ session as the simulator's workloads drive it.
extension ARQSession: SimReliableEndpoint {
    public func submit(_ batch: [UInt8]) -> SimSubmitResult {
        do {
            try send(batch)
            return .accepted
        } catch .sendQueueFull {
            return .backPressure
        } catch {
            return .rejected("\(error)")
        }
    }

    public func nextSessionEvent() -> SimSessionEvent? {
        guard let event = pollEvent() else { return nil }
        switch event {
        case .delivered(let batch): return .delivered(batch)
        case .peerUnreachable: return .peerUnreachable
        case .peerReachable: return .other("peerReachable")
        case .peerClosed: return .other("peerClosed")
        case .failed(let error): return .failed("\(error)")
        }
    }

    public var memoryUse: [SimMemoryUse] {
        let s = stats
        return [
            SimMemoryUse(name: "send queue bytes", used: s.queuedBytes, limit: configuration.maxQueuedBytes),
            SimMemoryUse(name: "segments in flight", used: s.segmentsInFlight, limit: Int(configuration.sendWindow)),
            SimMemoryUse(name: "receive buffer bytes", used: s.pendingReceiveBytes, limit: configuration.maxPendingReceiveBytes),
            SimMemoryUse(name: "out-of-order segments", used: s.outOfOrderSegments, limit: Int(configuration.receiveWindow)),
        ]
    }
}

extension ARQSession {
    /// A session for the sweep whose tuning is drawn from the wire's random bits, so each seed
    /// also probes another valid configuration: windows from 8 segments to the default,
    /// datagrams from 576 to 1472 bytes, redundancy on or off, ack delays, small send queues (back-pressure),
    /// a small receive buffer (flow control) and sequence numbers that start near the 32-bit wrap.
    /// Both ends of a wire draw the same tuning; their sequence starts mirror each other.
    public static func forSweep(_ spec: SweepSessionSpec) -> ARQSession {
        ARQSession(configuration: sweepConfiguration(spec), now: spec.now)
    }

    public static func sweepConfiguration(_ spec: SweepSessionSpec) -> ARQConfiguration {
        var r = SimRandom(seed: spec.wireRandom)
        func nearWrap() -> UInt32 { r.chance(0.5) ? UInt32.max &- UInt32(r.below(3000)) : UInt32(truncatingIfNeeded: r.next()) }
        let firstStart = nearWrap()
        let secondStart = nearWrap()
        var c = ARQConfiguration()
        c.initialSequence = SequenceNumber(spec.isFirst ? firstStart : secondStart)
        c.peerInitialSequence = SequenceNumber(spec.isFirst ? secondStart : firstStart)
        let windows: [UInt32] = [8, 16, 64, 256, 1024]
        c.sendWindow = windows[Int(r.below(UInt64(windows.count)))]
        c.receiveWindow = windows[Int(r.below(UInt64(windows.count)))]
        c.maxDatagramSize = r.chance(0.5) ? 1200 : r.int(in: 576 ... 1472)
        c.redundantCopies = r.int(in: 0 ... 3)
        c.redundancyBytesPerDatagram = r.int(in: 0 ... 256)
        c.maxAckDelay = .init(microseconds: r.below(100_001))
        c.keepaliveInterval = .init(microseconds: 1_000_000 + r.below(4_000_001))
        c.maxMessageSize = spec.maxBatchSize
        c.maxPendingReceiveBytes = r.chance(0.5) ? c.maxPendingReceiveBytes : 0  // the session raises it to its floor
        c.maxQueuedMessages = r.chance(0.5) ? c.maxQueuedMessages : r.int(in: 4 ... 64)
        c.maxQueuedBytes = r.chance(0.5) ? c.maxQueuedBytes : r.int(in: spec.maxBatchSize ... 8 * spec.maxBatchSize)
        return c
    }
}
