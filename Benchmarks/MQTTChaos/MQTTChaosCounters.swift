/// What one direction of the chaos proxy did (summed over connections by the proxy).
public struct MQTTChaosCounters: Sendable, Equatable {
    /// Packets read (every type).
    public var packets = 0
    /// QoS 0 and 1 PUBLISH packets, the ones chaos applies to.
    public var publishes = 0
    /// Publishes given a delay above zero.
    public var delayed = 0
    /// Publishes sent twice.
    public var duplicated = 0
    /// Bursts started, and publishes held in one until its last publish arrived.
    public var bursts = 0
    public var burstHeld = 0
    /// Bursts released early because `maximumBurstHoldMicroseconds` passed or the stream ended.
    public var burstsCutShort = 0
    /// QoS 2 publishes, passed untouched (their four-packet handshake is not played with).
    public var qos2Passed = 0
    /// Publishes that left after at least one publish that arrived later, and the most later
    /// ones that overtook a single publish.
    public var overtaken = 0
    public var maximumOvertakenDepth = 0
    /// PUBACKs dropped because they answered the proxy's own copy of a QoS 1 publish (the
    /// sender gets exactly one PUBACK per publish it sent).
    public var surplusAcksDropped = 0
    /// Duplicates not made: the publish's packet id still had copies awaiting their PUBACK,
    /// or the ack table was full.
    public var duplicatesSkipped = 0
    /// Publishes passed without chaos because `maximumHeldPackets` were already held.
    public var heldFull = 0
    /// Packets written on (copies included).
    public var forwarded = 0

    public init() {}

    public static func + (a: MQTTChaosCounters, b: MQTTChaosCounters) -> MQTTChaosCounters {
        var sum = a
        sum.packets += b.packets
        sum.publishes += b.publishes
        sum.delayed += b.delayed
        sum.duplicated += b.duplicated
        sum.bursts += b.bursts
        sum.burstHeld += b.burstHeld
        sum.burstsCutShort += b.burstsCutShort
        sum.qos2Passed += b.qos2Passed
        sum.overtaken += b.overtaken
        sum.maximumOvertakenDepth = max(a.maximumOvertakenDepth, b.maximumOvertakenDepth)
        sum.surplusAcksDropped += b.surplusAcksDropped
        sum.duplicatesSkipped += b.duplicatesSkipped
        sum.heldFull += b.heldFull
        sum.forwarded += b.forwarded
        return sum
    }

    /// One JSON object, snake_case keys.
    public var json: String {
        let fields: [(String, Int)] = [
            ("packets", packets), ("publishes", publishes), ("delayed", delayed), ("duplicated", duplicated),
            ("bursts", bursts), ("burst_held", burstHeld), ("bursts_cut_short", burstsCutShort), ("qos2_passed", qos2Passed),
            ("overtaken", overtaken), ("max_overtaken_depth", maximumOvertakenDepth), ("surplus_acks_dropped", surplusAcksDropped),
            ("duplicates_skipped", duplicatesSkipped), ("held_full", heldFull), ("forwarded", forwarded),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}
