import InkProtocol

/// Why a run stopped before its end: the network caught an endpoint misbehaving in time.
public enum SimFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// Time could not move: more than `SimNetwork.maxEventsPerInstant` events at one instant
    /// (a deadline that stays in the past after `handleTimeout`, or a datagram ping-pong at zero delay).
    case livelock(endpoint: Int, at: Instant)
    /// One drain produced more than `SimNetwork.maxTransmitsPerDrain` datagrams.
    case transmitFlood(endpoint: Int, at: Instant)

    public var description: String {
        switch self {
        case .livelock(let e, let t): "livelock: endpoint \(e) keeps time from moving at \(t)"
        case .transmitFlood(let e, let t): "endpoint \(e) emitted over \(SimNetwork.maxTransmitsPerDrain) datagrams in one drain at \(t)"
        }
    }
}

/// A deterministic virtual-time network of point-to-point wires between `DatagramEndpoint`s.
///
/// Each endpoint talks to exactly one peer (its `pollTransmit` output goes to that peer) and
/// lives on a node; partitions cut wires between nodes and pauses freeze a node. The network owns
/// the clock: `advance(to:)` jumps from event to event (the earliest datagram due or endpoint
/// deadline), and at each instant visits endpoints in id order, following the
/// `DatagramEndpoint` call order: feed every due datagram, call `handleTimeout` if its deadline
/// passed, drain `pollTransmit`, re-read `pollTimeout`. Nothing here iterates a hashed
/// collection, so one seed always gives the same run and the same `trace` digest.
public final class SimNetwork {
    public typealias EndpointID = Int
    public typealias NodeID = Int

    /// Events one instant may hold before the run is declared a livelock.
    public static let maxEventsPerInstant = 100_000
    /// Datagrams one drain of `pollTransmit` may produce before it counts as a flood.
    public static let maxTransmitsPerDrain = 10_000

    private struct Slot {
        var endpoint: any DatagramEndpoint
        var node: NodeID
        var peer: EndpointID
        var deadline: Instant?
    }

    private struct Window {
        var start: Instant
        var end: Instant
        var nodes: [NodeID]
        func covers(_ t: Instant) -> Bool { start <= t && t < end }
    }

    public private(set) var now: Instant
    public private(set) var trace = TraceDigest()
    private var random: SimRandom
    private var slots: [Slot] = []
    /// `links[i]` carries datagrams from endpoint i to its peer.
    private var links: [SimLink] = []
    private var partitions: [Window] = []
    private var pauses: [Window] = []

    public init(seed: UInt64, start: Instant = .zero) {
        random = SimRandom(seed: seed)
        now = start
    }

    // MARK: Topology and faults

    /// Wires `a` (on `nodeA`) to `b` (on `nodeB`), each direction with its own link and random stream.
    @discardableResult
    public func connect(_ a: any DatagramEndpoint, node nodeA: NodeID, _ b: any DatagramEndpoint, node nodeB: NodeID,
                        aToB: LinkConfiguration, bToA: LinkConfiguration) throws(SimFailure) -> (EndpointID, EndpointID) {
        let idA = slots.count
        let idB = idA + 1
        slots.append(Slot(endpoint: a, node: nodeA, peer: idB, deadline: nil))
        slots.append(Slot(endpoint: b, node: nodeB, peer: idA, deadline: nil))
        links.append(SimLink(configuration: aToB, random: random.split()))
        links.append(SimLink(configuration: bToA, random: random.split()))
        try drain(idA)
        try drain(idB)
        return (idA, idB)
    }

    /// Cuts every wire between `side` and the other nodes during [start, end): datagrams sent in
    /// that window, or due to arrive in it, are lost.
    public func partition(_ side: [NodeID], from start: Instant, until end: Instant) {
        partitions.append(Window(start: start, end: end, nodes: side))
    }

    /// Freezes `node` during [start, end) (a sleeping laptop): datagrams to it are lost and its
    /// endpoints' timers wait until it wakes. Its state survives; see `replace` for a restart.
    public func pause(_ node: NodeID, from start: Instant, until end: Instant) {
        pauses.append(Window(start: start, end: end, nodes: [node]))
    }

    /// Restarts an endpoint: `fresh` takes its place (and its wire) from now on.
    public func replace(_ id: EndpointID, with fresh: any DatagramEndpoint) throws(SimFailure) {
        slots[id].endpoint = fresh
        trace.mix(0xF0)
        trace.mix(UInt64(id))
        try drain(id)
    }

    /// Changes how the direction from `id` to its peer behaves from now on (e.g. healing).
    public func setConfiguration(from id: EndpointID, _ configuration: LinkConfiguration) {
        links[id].configuration = configuration
    }

    // MARK: Inspection

    public var endpointCount: Int { slots.count }
    public func endpoint(_ id: EndpointID) -> any DatagramEndpoint { slots[id].endpoint }
    public func node(of id: EndpointID) -> NodeID { slots[id].node }
    public func peer(of id: EndpointID) -> EndpointID { slots[id].peer }
    /// Counters of the direction from `id` to its peer.
    public func stats(from id: EndpointID) -> LinkStats { links[id].stats }
    /// Datagrams in flight from `id` to its peer.
    public func inFlight(from id: EndpointID) -> Int { links[id].inFlight }
    public func configuration(from id: EndpointID) -> LinkConfiguration { links[id].configuration }

    public func isPaused(_ node: NodeID, at t: Instant) -> Bool {
        pauses.contains { $0.nodes[0] == node && $0.covers(t) }
    }

    public func isCut(from a: EndpointID, at t: Instant) -> Bool {
        let na = slots[a].node
        let nb = slots[slots[a].peer].node
        return partitions.contains { $0.covers(t) && $0.nodes.contains(na) != $0.nodes.contains(nb) }
    }

    // MARK: Time

    /// The earliest instant at which something happens, if anything is pending.
    public func nextEventTime() -> Instant? {
        var next: Instant? = nil
        for link in links {
            if let due = link.nextDue, next.map({ due < $0 }) ?? true { next = due }
        }
        for id in slots.indices {
            if let d = effectiveDeadline(id), next.map({ d < $0 }) ?? true { next = d }
        }
        return next.map { max($0, now) }
    }

    /// Runs every event up to and including `target`, then sets the clock to `target`.
    public func advance(to target: Instant) throws(SimFailure) {
        var eventsHere = 0
        while let t = nextEventTime(), t <= target {
            if t > now {
                now = t
                eventsHere = 0
            }
            eventsHere += 1
            if eventsHere > Self.maxEventsPerInstant {
                throw .livelock(endpoint: firstBusyEndpoint() ?? -1, at: now)
            }
            try processInstant()
        }
        if target > now { now = target }
    }

    /// Drains `id`'s `pollTransmit` now; call it after giving the endpoint application input.
    public func flush(_ id: EndpointID) throws(SimFailure) {
        try drain(id)
    }

    // MARK: Internals

    private func effectiveDeadline(_ id: EndpointID) -> Instant? {
        guard var d = slots[id].deadline else { return nil }
        let node = slots[id].node
        for p in pauses where p.nodes[0] == node && p.covers(max(d, now)) { d = max(d, p.end) }
        return d
    }

    private func firstBusyEndpoint() -> EndpointID? {
        slots.indices.first { id in (effectiveDeadline(id).map { $0 <= now } ?? false) || (links[slots[id].peer].nextDue.map { $0 <= now } ?? false) }
    }

    private func processInstant() throws(SimFailure) {
        for id in slots.indices {
            let inbound = slots[id].peer
            let paused = isPaused(slots[id].node, at: now)
            var touched = false
            while let datagram = links[inbound].popDue(now: now) {
                if paused || isCut(from: inbound, at: now) {
                    links[inbound].stats.partitioned += 1
                    trace.mix(0xD0 | UInt64(id))
                    continue
                }
                links[inbound].stats.delivered += 1
                links[inbound].stats.deliveredBytes += datagram.count
                trace.mix(now.microseconds)
                trace.mix(0xA0 | UInt64(id))
                slots[id].endpoint.handleDatagram(datagram, now: now)
                touched = true
            }
            if !paused, let deadline = slots[id].deadline, deadline <= now {
                trace.mix(now.microseconds)
                trace.mix(0xB0 | UInt64(id))
                slots[id].endpoint.handleTimeout(now: now)
                touched = true
            }
            if touched { try drain(id) }
        }
    }

    private func drain(_ id: EndpointID) throws(SimFailure) {
        var count = 0
        while let datagram = slots[id].endpoint.pollTransmit(now: now) {
            count += 1
            if count > Self.maxTransmitsPerDrain { throw .transmitFlood(endpoint: id, at: now) }
            trace.mix(now.microseconds)
            trace.mix(datagram)
            if isCut(from: id, at: now) {
                links[id].countPartitioned(datagram)
                trace.mix(SimLink.Outcome.partitioned.rawValue)
            } else {
                trace.mix(links[id].send(datagram, now: now).rawValue)
            }
        }
        slots[id].deadline = slots[id].endpoint.pollTimeout()
    }
}
