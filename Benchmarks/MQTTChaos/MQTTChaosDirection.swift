/// Acknowledgements still expected for a QoS 1 publish the proxy sent twice.
struct AckCopies: Sendable {
    var awaited: Int
    var forwardedOne: Bool
}

/// One direction of a proxied connection: its framer, decision stream, held publishes and the
/// bookkeeping behind the overtaking counters.
struct DirectionState {
    /// A publish waiting for its due time.
    struct Scheduled {
        var due: UInt64
        var bytes: [UInt8]
        /// Arrival index of an original (nil for the proxy's copy).
        var original: Int?
    }

    /// A publish held in a burst, with the delays it gets once released.
    struct BurstMember {
        var packet: MQTTPacket
        var original: Int
        var decision: MQTTChaosDecision
    }

    let direction: MQTTChaosModel.Direction
    var framer = MQTTPacketFramer()
    var model: MQTTChaosModel?
    var counters = MQTTChaosCounters()
    /// Sorted by due time, latest first (next out is `last`); equal due times leave in arrival order.
    var scheduled: [Scheduled] = []
    var burst: [BurstMember] = []
    var burstStartedAt: UInt64?
    /// Arrival indices of originals not yet sent, ascending.
    var unsent: [Int] = []
    var nextArrival = 0
    var sentOriginals = 0
    /// Keyed by packet id; lookups only, never iterated.
    var ackCopies: [UInt16: AckCopies] = [:]
    /// Packets waiting behind the held publishes (DISCONNECT and whatever follows it).
    var deferred: [[UInt8]] = []
    /// DISCONNECT or end of stream read: what follows waits for the held publishes.
    var endPending = false
    var streamEnded = false
    var endSent = false

    init(direction: MQTTChaosModel.Direction) { self.direction = direction }

    var heldCount: Int { scheduled.count + burst.count }

    func nextDeadline(_ burstLimit: UInt64) -> UInt64? {
        let burstDeadline = burst.isEmpty ? nil : burstStartedAt.map { $0 &+ burstLimit }
        return [scheduled.last?.due, burstDeadline].compactMap { $0 }.min()
    }

    mutating func schedule(_ packet: MQTTPacket, decision: MQTTChaosDecision, now: UInt64) {
        let index = nextArrival
        nextArrival += 1
        unsent.append(index)
        switch decision.burst {
        case .none:
            enqueue(packet, original: index, decision: decision, from: now)
        case .held, .releases:
            if burst.isEmpty {
                burstStartedAt = now
                counters.bursts += 1
            }
            burst.append(BurstMember(packet: packet, original: index, decision: decision))
            if decision.burst == .releases { releaseBurst(now: now) } else { counters.burstHeld += 1 }
        }
    }

    mutating func releaseBurst(now: UInt64) {
        for member in burst { enqueue(member.packet, original: member.original, decision: member.decision, from: now) }
        burst.removeAll()
        burstStartedAt = nil
    }

    private mutating func enqueue(_ packet: MQTTPacket, original: Int, decision: MQTTChaosDecision, from start: UInt64) {
        insert(Scheduled(due: start &+ decision.delayMicroseconds, bytes: packet.bytes, original: original))
        if let copyDelay = decision.duplicateDelayMicroseconds {
            insert(Scheduled(due: start &+ copyDelay, bytes: packet.markedDuplicate().bytes, original: nil))
        }
    }

    private mutating func insert(_ item: Scheduled) {
        // First index whose due time is not later than the new one: the new one goes before it.
        var low = 0, high = scheduled.count
        while low < high {
            let middle = (low + high) / 2
            if scheduled[middle].due > item.due { low = middle + 1 } else { high = middle }
        }
        scheduled.insert(item, at: low)
    }

    /// The next publish due by `now`, counting how many later arrivals already overtook it.
    mutating func popDue(now: UInt64) -> [UInt8]? {
        guard let next = scheduled.last, next.due <= now else { return nil }
        scheduled.removeLast()
        if let index = next.original { noteSent(index) }
        return next.bytes
    }

    private mutating func noteSent(_ index: Int) {
        var low = 0, high = unsent.count
        while low < high {
            let middle = (low + high) / 2
            if unsent[middle] < index { low = middle + 1 } else { high = middle }
        }
        // `low` originals below `index` are unsent, so `index - low` below it were sent; the
        // rest of those sent arrived after it.
        let overtakenBy = sentOriginals - (index - low)
        if low < unsent.count, unsent[low] == index { unsent.remove(at: low) }
        sentOriginals += 1
        if overtakenBy > 0 {
            counters.overtaken += 1
            counters.maximumOvertakenDepth = max(counters.maximumOvertakenDepth, overtakenBy)
        }
    }
}
