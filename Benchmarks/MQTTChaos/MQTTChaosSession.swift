/// The chaos of one proxied MQTT connection, sans-IO: bytes in from either side with
/// `handleBytes(_:from:now:)`, a timer at `nextDeadline` calls `handleTimeout(now:)`, and
/// after either the caller drains `pollTransmit()` until nil and writes each result to its side.
///
/// QoS 0 and 1 PUBLISH packets get their direction's seeded `MQTTChaosDecision` (delay,
/// duplicate, burst hold). Every other packet (and QoS 2 publishes) is forwarded at once, in the
/// order read, except DISCONNECT and the end of the stream, which wait until the publishes held
/// in their direction have left (so a clean disconnect loses nothing). A QoS 1 publish sent twice
/// is answered by two PUBACKs; the first goes back, the surplus one is dropped, so the sender's
/// session sees exactly one acknowledgement per publish.
public struct MQTTChaosSession {
    public enum Side: Sendable, Equatable {
        case client, broker
        var other: Side { self == .client ? .broker : .client }
    }

    public enum Transmit: Sendable, Equatable {
        /// Write these bytes to that side.
        case bytes([UInt8], to: Side)
        /// Nothing more goes to that side: shut its stream down once written.
        case end(to: Side)
    }

    /// Publishes held (delayed or in a burst) per direction; past it chaos is skipped.
    public static let maximumHeldPackets = 10_000
    /// Packet ids per direction whose duplicated publish still awaits its PUBACKs.
    public static let maximumTrackedDuplicates = 4096
    /// A burst whose last publish has not come after this long (µs) is released anyway.
    public static let defaultMaximumBurstHoldMicroseconds: UInt64 = 1_000_000

    public let configuration: MQTTChaosConfiguration
    public let runSeed: UInt64
    public var maximumBurstHoldMicroseconds = MQTTChaosSession.defaultMaximumBurstHoldMicroseconds
    /// The client identifier from CONNECT, once read.
    public private(set) var clientIdentifier: [UInt8]?
    /// Set when a side's stream failed to parse; the caller closes the connection.
    public private(set) var framingError: MQTTFramingError?
    /// When set, every PUBLISH read (any QoS) is also kept for `pollArrival()`: a tap for
    /// harnesses that time the broker hop. Off by default.
    public var recordsArrivals = false
    /// Arrivals kept until polled; past this the oldest unpolled ones are not kept.
    public static let maximumRecordedArrivals = 65_536
    private var arrivals: [(side: Side, packet: MQTTPacket)] = []
    private var arrivalsRead = 0

    private var toBroker: DirectionState
    private var toClient: DirectionState
    private var outbox: [Transmit] = []
    private var outboxRead = 0
    /// How many earlier connections of a client identifier the proxy saw (so a reconnecting
    /// client draws a fresh stream); asked once, at the first CONNECT or publish.
    private let connectionOrdinal: ([UInt8]) -> Int

    public init(configuration: MQTTChaosConfiguration, runSeed: UInt64, connectionOrdinal: @escaping ([UInt8]) -> Int = { _ in 0 }) {
        self.configuration = configuration
        self.runSeed = runSeed
        self.connectionOrdinal = connectionOrdinal
        toBroker = DirectionState(direction: .clientToBroker)
        toClient = DirectionState(direction: .brokerToClient)
    }

    /// Counters of the direction that flows from `side`.
    public func counters(from side: Side) -> MQTTChaosCounters { side == .client ? toBroker.counters : toClient.counters }

    /// Publishes of the direction from `side` still held (scheduled or in a burst).
    public func heldCount(from side: Side) -> Int { side == .client ? toBroker.heldCount : toClient.heldCount }

    /// Earliest time `handleTimeout` has work: a held publish falls due or a burst times out.
    public var nextDeadline: UInt64? {
        [toBroker.nextDeadline(maximumBurstHoldMicroseconds), toClient.nextDeadline(maximumBurstHoldMicroseconds)]
            .compactMap { $0 }.min()
    }

    public mutating func handleBytes(_ bytes: UnsafeRawBufferPointer, from side: Side, now: UInt64) {
        guard framingError == nil else { return }
        withDirection(from: side) { $0.framer.handleBytes(bytes) }
        drainFramer(from: side, now: now)
    }

    public mutating func handleBytes(_ bytes: [UInt8], from side: Side, now: UInt64) {
        bytes.withUnsafeBytes { handleBytes($0, from: side, now: now) }
    }

    /// `side` closed its sending half: bursts are released; the end is passed on after the
    /// held publishes.
    public mutating func handleEndOfStream(from side: Side, now: UInt64) {
        withDirection(from: side) { direction in
            direction.endPending = true
            direction.streamEnded = true
            if !direction.burst.isEmpty {
                direction.counters.burstsCutShort += 1
                direction.releaseBurst(now: now)
            }
        }
        releaseDue(now: now)
    }

    /// Moves every publish due by `now` out, and releases bursts held too long. Harmless early.
    public mutating func handleTimeout(now: UInt64) {
        let limit = maximumBurstHoldMicroseconds
        for side in [Side.client, .broker] {
            withDirection(from: side) { direction in
                if let started = direction.burstStartedAt, !direction.burst.isEmpty, now >= started &+ limit {
                    direction.counters.burstsCutShort += 1
                    direction.releaseBurst(now: now)
                }
            }
        }
        releaseDue(now: now)
    }

    /// The next packet or end to write, in order per side.
    public mutating func pollTransmit() -> Transmit? {
        guard outboxRead < outbox.count else { return nil }
        let next = outbox[outboxRead]
        outboxRead += 1
        if outboxRead == outbox.count {
            outbox.removeAll(keepingCapacity: true)
            outboxRead = 0
        }
        return next
    }

    /// The next PUBLISH read since the last call (with `recordsArrivals`), in reading order.
    public mutating func pollArrival() -> (side: Side, packet: MQTTPacket)? {
        guard arrivalsRead < arrivals.count else { return nil }
        let next = arrivals[arrivalsRead]
        arrivalsRead += 1
        if arrivalsRead == arrivals.count {
            arrivals.removeAll(keepingCapacity: true)
            arrivalsRead = 0
        }
        return next
    }

    // MARK: - packets

    private mutating func drainFramer(from side: Side, now: UInt64) {
        while framingError == nil {
            let packet: MQTTPacket?
            do {
                var direction = side == .client ? toBroker : toClient
                packet = try direction.framer.pollPacket()
                if side == .client { toBroker = direction } else { toClient = direction }
            } catch {
                framingError = error
                return
            }
            guard let packet else { return }
            handlePacket(packet, from: side, now: now)
        }
    }

    private mutating func handlePacket(_ packet: MQTTPacket, from side: Side, now: UInt64) {
        var afterEnd = false
        withDirection(from: side) { direction in
            direction.counters.packets += 1
            afterEnd = direction.endPending
        }
        if recordsArrivals, packet.type == .publish, arrivals.count < MQTTChaosSession.maximumRecordedArrivals {
            arrivals.append((side, packet))
        }
        if afterEnd {
            // Nothing is valid after DISCONNECT; pass it on behind the held publishes, untouched.
            forward(packet.bytes, from: side)
            releaseDue(now: now)
            return
        }
        switch packet.type {
        case .connect where side == .client && clientIdentifier == nil:
            clientIdentifier = packet.connectClientIdentifier.map(Array.init) ?? []
            forward(packet.bytes, from: side)
        case .publish where packet.publishQoS == 2:
            withDirection(from: side) { $0.counters.qos2Passed += 1 }
            forward(packet.bytes, from: side)
        case .publish:
            handlePublish(packet, from: side, now: now)
        case .puback:
            if let id = packet.packetIdentifier, dropsSurplusAck(id, from: side) { return }
            forward(packet.bytes, from: side)
        case .disconnect:
            withDirection(from: side) { direction in
                direction.endPending = true
                if !direction.burst.isEmpty {
                    direction.counters.burstsCutShort += 1
                    direction.releaseBurst(now: now)
                }
            }
            forward(packet.bytes, from: side)
            releaseDue(now: now)
        default:
            forward(packet.bytes, from: side)
        }
    }

    private mutating func handlePublish(_ packet: MQTTPacket, from side: Side, now: UInt64) {
        if clientIdentifier == nil { clientIdentifier = [] }
        let identifier = clientIdentifier ?? []
        let ordinal = connectionOrdinalIfNeeded(for: identifier, side: side)
        var ackTableOfOtherSide = side == .client ? toClient.ackCopies : toBroker.ackCopies
        let configuration = self.configuration
        let seed = runSeed
        withDirection(from: side) { direction in
            direction.counters.publishes += 1
            if direction.model == nil {
                direction.model = MQTTChaosModel(
                    configuration: configuration,
                    seed: MQTTChaosModel.streamSeed(runSeed: seed, clientIdentifier: identifier, connectionOrdinal: ordinal,
                                                    direction: direction.direction))
            }
            var decision = direction.model!.next()
            guard direction.heldCount < MQTTChaosSession.maximumHeldPackets else {
                direction.counters.heldFull += 1
                direction.schedule(packet, decision: MQTTChaosDecision(delayMicroseconds: 0), now: now)
                return
            }
            if decision.delayMicroseconds > 0 { direction.counters.delayed += 1 }
            if decision.duplicateDelayMicroseconds != nil {
                if packet.publishQoS == 1 {
                    if let id = packet.packetIdentifier, ackTableOfOtherSide[id] == nil,
                       ackTableOfOtherSide.count < MQTTChaosSession.maximumTrackedDuplicates {
                        ackTableOfOtherSide[id] = AckCopies(awaited: 2, forwardedOne: false)
                        direction.counters.duplicated += 1
                    } else {
                        decision.duplicateDelayMicroseconds = nil
                        direction.counters.duplicatesSkipped += 1
                    }
                } else {
                    direction.counters.duplicated += 1
                }
            }
            direction.schedule(packet, decision: decision, now: now)
        }
        if side == .client { toClient.ackCopies = ackTableOfOtherSide } else { toBroker.ackCopies = ackTableOfOtherSide }
        releaseDue(now: now)
    }

    /// Whether this PUBACK answers a copy whose sibling was already acknowledged.
    private mutating func dropsSurplusAck(_ id: UInt16, from side: Side) -> Bool {
        var drop = false
        withDirection(from: side) { direction in
            guard var entry = direction.ackCopies[id] else { return }
            entry.awaited -= 1
            if entry.forwardedOne {
                drop = true
                direction.counters.surplusAcksDropped += 1
            }
            entry.forwardedOne = true
            direction.ackCopies[id] = entry.awaited > 0 ? entry : nil
        }
        return drop
    }

    private var ordinalAsked: Int?
    private mutating func connectionOrdinalIfNeeded(for identifier: [UInt8], side: Side) -> Int {
        if let ordinalAsked { return ordinalAsked }
        let ordinal = connectionOrdinal(identifier)
        ordinalAsked = ordinal
        return ordinal
    }

    /// Sends a packet on at once, unless a DISCONNECT or end already waits in its direction
    /// (then it stays behind it).
    private mutating func forward(_ bytes: [UInt8], from side: Side) {
        var deferred = false
        withDirection(from: side) { direction in
            if direction.endPending {
                direction.deferred.append(bytes)
                deferred = true
            } else {
                direction.counters.forwarded += 1
            }
        }
        if !deferred { outbox.append(.bytes(bytes, to: side.other)) }
    }

    private mutating func releaseDue(now: UInt64) {
        for side in [Side.client, .broker] {
            var out: [Transmit] = []
            withDirection(from: side) { direction in
                while let bytes = direction.popDue(now: now) {
                    direction.counters.forwarded += 1
                    out.append(.bytes(bytes, to: side.other))
                }
                guard direction.heldCount == 0 else { return }
                for bytes in direction.deferred {
                    direction.counters.forwarded += 1
                    out.append(.bytes(bytes, to: side.other))
                }
                direction.deferred.removeAll()
                if direction.streamEnded, !direction.endSent {
                    direction.endSent = true
                    out.append(.end(to: side.other))
                }
            }
            outbox.append(contentsOf: out)
        }
    }

    private mutating func withDirection(from side: Side, _ body: (inout DirectionState) -> Void) {
        if side == .client { body(&toBroker) } else { body(&toClient) }
    }
}
