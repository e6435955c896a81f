import InkProtocol

/// What one endpoint of a sweep needs to build its session.
public struct SweepSessionSpec: Sendable {
    /// Shared by the two endpoints of a wire.
    public var connectionID: UInt64
    public var now: Instant
    public var endpoint: Int
    public var peer: Int
    /// True for the wire's first endpoint.
    public var isFirst: Bool
    /// Random bits shared by both endpoints of the wire, for sessions that vary their tuning per seed.
    public var wireRandom: UInt64
    /// Largest batch the workload will submit.
    public var maxBatchSize: Int
}

public enum SweepVerdict: Equatable, Sendable {
    case pass
    /// A batch was lost, duplicated, reordered or corrupted, refused although valid, or a
    /// session's queue passed its bound.
    case correctness(String)
    /// Accepted batches were not all delivered within the bound after healing, or time stalled.
    case liveness(String)
}

public struct SweepOutcome: Sendable {
    public var seed: UInt64
    public var verdict: SweepVerdict
    /// Digest of the whole run; the same seed gives the same digest.
    public var trace: TraceDigest
    public var batches = 0
    public var bytes = 0
    public var datagrams = 0
    /// From healing to the last delivery (zero if everything arrived before healing).
    public var recovery = Instant.Duration.zero
    public var peerUnreachableEvents = 0
}

/// VOPR-style randomized run: build the seed's scenario, inject its faults, heal, and check that
/// every accepted batch reaches its peer exactly once, in order, intact, within the bound after
/// healing, with every session queue inside its bound the whole time.
public enum SweepRunner {
    private struct Producer {
        var random: SimRandom
        var traffic: SweepScenario.Traffic
        var produced = 0
        var next: Instant
        var backlog: [[UInt8]] = []
        /// Batches the session accepted, in order: what the peer must deliver.
        var accepted: [[UInt8]] = []
        /// How many of the peer's accepted batches this endpoint has delivered.
        var delivered = 0
        /// When a slow application next takes its delivered batches.
        var consumeAt = SweepScenario.start
    }

    /// Instants one run may visit; far above any scenario's need, it only stops a stuck loop.
    public static let maxSteps = 20_000_000

    public static func run(seed: UInt64, configuration c: SweepConfiguration = .init(),
                           makeSession: (SweepSessionSpec) -> any SimReliableEndpoint) -> SweepOutcome {
        let scenario = SweepScenario(seed: seed, configuration: c)
        var seeds = SimRandom(seed: seed ^ 0xA5A5_5A5A_F00D_CAFE)
        let network = SimNetwork(seed: seeds.next(), start: SweepScenario.start)
        var outcome = SweepOutcome(seed: seed, verdict: .pass, trace: TraceDigest())
        var sessions: [any SimReliableEndpoint] = []
        var producers: [Producer] = []

        func fail(_ v: SweepVerdict) -> SweepOutcome {
            outcome.verdict = v
            outcome.trace = network.trace
            return outcome
        }

        do {
            for (w, wire) in scenario.wires.enumerated() {
                let id = UInt64(w + 1) << 32 | (seed & 0xFFFF_FFFF)
                let bits = seeds.next()
                let a = makeSession(SweepSessionSpec(connectionID: id, now: network.now, endpoint: 2 * w, peer: 2 * w + 1,
                                                     isFirst: true, wireRandom: bits, maxBatchSize: c.maxBatchSize))
                let b = makeSession(SweepSessionSpec(connectionID: id, now: network.now, endpoint: 2 * w + 1, peer: 2 * w,
                                                     isFirst: false, wireRandom: bits, maxBatchSize: c.maxBatchSize))
                sessions += [a, b]
                try network.connect(a, node: wire.nodes.0, b, node: wire.nodes.1, aToB: wire.faulty.0, bToA: wire.faulty.1)
            }
        } catch {
            return fail(.liveness("\(error) while connecting"))
        }
        for p in scenario.partitions { network.partition(p.nodes, from: p.start, until: p.end) }
        for p in scenario.pauses { network.pause(p.nodes[0], from: p.start, until: p.end) }
        for t in scenario.traffic {
            var r = seeds.split()
            let first = SweepScenario.start + .init(microseconds: r.below(2 * t.meanGap.microseconds + 1))
            producers.append(Producer(random: r, traffic: t, next: first))
        }

        let deadline = scenario.healAt + c.healBound
        var healed = false
        var lastDelivery = SweepScenario.start
        var steps = 0
        while true {
            steps += 1
            if steps > maxSteps { return fail(.liveness("runner stalled: over \(maxSteps) steps at \(network.now)")) }
            // Next instant: the network's next event, a production, or healing.
            var t = network.nextEventTime()
            for p in producers where p.produced < p.traffic.batches && p.next < scenario.healAt
                && p.backlog.count < c.applicationBacklogLimit {
                t = min(t ?? p.next, p.next)
            }
            for e in producers.indices where producers[e].traffic.consumeEvery > .zero && producers[e].consumeAt > network.now
                && producers[e].delivered < producers[network.peer(of: e)].accepted.count {
                t = min(t ?? producers[e].consumeAt, producers[e].consumeAt)
            }
            if !healed { t = min(t ?? scenario.healAt, scenario.healAt) }
            guard let target = t, target <= deadline else { break }
            do {
                try network.advance(to: target)
            } catch {
                return fail(.liveness("\(error)"))
            }
            // A production postponed by a full backlog may lie in the past: act at the network's time.
            let now = network.now
            if !healed && now >= scenario.healAt {
                healed = true
                for (w, wire) in scenario.wires.enumerated() {
                    network.setConfiguration(from: 2 * w, wire.healed.0)
                    network.setConfiguration(from: 2 * w + 1, wire.healed.1)
                }
            }
            // Applications: produce, offer the backlog to awake sessions, take deliveries.
            for e in producers.indices {
                let awake = !network.isPaused(network.node(of: e), at: now)
                while producers[e].produced < producers[e].traffic.batches, producers[e].next <= now,
                      producers[e].next < scenario.healAt, producers[e].backlog.count < c.applicationBacklogLimit {
                    producers[e].backlog.append(makeBatch(endpoint: e, &producers[e], maxSize: c.maxBatchSize))
                    let gap = producers[e].random.below(2 * producers[e].traffic.meanGap.microseconds + 1)
                    producers[e].next = producers[e].next + .init(microseconds: gap)
                }
                if awake {
                    while let batch = producers[e].backlog.first {
                        let result = sessions[e].submit(batch)
                        if result == .backPressure { break }
                        if case .rejected(let why) = result {
                            return fail(.correctness("endpoint \(e) rejected a valid \(batch.count)-byte batch: \(why)"))
                        }
                        producers[e].accepted.append(batch)
                        producers[e].backlog.removeFirst()
                    }
                }
                // Deliveries (a slow application only at its own pace), then memory.
                let peer = network.peer(of: e)
                if awake && now >= producers[e].consumeAt {
                    producers[e].consumeAt = now + producers[e].traffic.consumeEvery
                    while let event = sessions[e].nextSessionEvent() {
                        switch event {
                        case .delivered(let batch):
                            let k = producers[e].delivered
                            guard k < producers[peer].accepted.count else {
                                return fail(.correctness("endpoint \(e) delivered a batch beyond the \(k) endpoint \(peer) sent (duplicate or phantom) at \(now)"))
                            }
                            guard batch == producers[peer].accepted[k] else {
                                return fail(.correctness("endpoint \(e) delivered batch \(k) from endpoint \(peer) wrong (\(describe(batch)) instead of \(describe(producers[peer].accepted[k]))) at \(now)"))
                            }
                            producers[e].delivered += 1
                            outcome.batches += 1
                            outcome.bytes += batch.count
                            lastDelivery = now
                        case .peerUnreachable:
                            outcome.peerUnreachableEvents += 1
                        case .failed(let why):
                            return fail(.correctness("endpoint \(e) session failed: \(why) at \(now)"))
                        case .other:
                            break
                        }
                    }
                }
                // Submitting and taking events both may give the session something to send.
                do { try network.flush(e) } catch { return fail(.liveness("\(error)")) }
                for m in sessions[e].memoryUse where m.used > m.limit {
                    return fail(.correctness("endpoint \(e) \(m.name) holds \(m.used), over its bound \(m.limit), at \(now)"))
                }
                if network.inFlight(from: e) > network.configuration(from: e).queueCapacity {
                    return fail(.correctness("link from endpoint \(e) holds more than its queue bound"))
                }
            }
            if healed && finished(producers, network) { break }
        }
        outcome.trace = network.trace
        outcome.datagrams = (0 ..< sessions.count).reduce(0) { $0 + network.stats(from: $1).sentDatagrams }
        outcome.recovery = lastDelivery.since(scenario.healAt)
        if !finished(producers, network) {
            let missing = sessions.indices.compactMap { e -> String? in
                let peer = network.peer(of: e)
                let want = producers[peer].accepted.count + producers[peer].backlog.count
                return producers[e].delivered < want ? "endpoint \(e) delivered \(producers[e].delivered) of \(want) from \(peer)" : nil
            }
            outcome.verdict = .liveness("not converged by heal + \(c.healBound) (\(deadline)): " + missing.joined(separator: "; "))
        }
        return outcome
    }

    private static func finished(_ producers: [Producer], _ network: SimNetwork) -> Bool {
        producers.indices.allSatisfy { e in
            let peer = network.peer(of: e)
            return producers[peer].backlog.isEmpty && producers[e].delivered == producers[peer].accepted.count
        }
    }

    /// `[u32 endpoint][u32 index][payload]`, little-endian; a few are larger than one datagram.
    private static func makeBatch(endpoint: Int, _ p: inout Producer, maxSize: Int) -> [UInt8] {
        let large = p.random.chance(p.traffic.largeChance)
        let small = min(maxSize, 600)
        let size = large && maxSize > small ? p.random.int(in: small ... maxSize) : p.random.int(in: 8 ... max(8, small))
        var batch = [UInt8](repeating: 0, count: max(8, size))
        for k in 0 ..< 4 {
            batch[k] = UInt8(truncatingIfNeeded: endpoint >> (8 * k))
            batch[4 + k] = UInt8(truncatingIfNeeded: p.produced >> (8 * k))
        }
        var fill = p.random.next()
        for i in 8 ..< batch.count {
            if i % 8 == 0 { fill = p.random.next() }
            batch[i] = UInt8(truncatingIfNeeded: fill >> (8 * UInt64(i % 8)))
        }
        p.produced += 1
        return batch
    }

    private static func describe(_ batch: [UInt8]) -> String {
        guard batch.count >= 8 else { return "\(batch.count) bytes" }
        let origin = (0 ..< 4).reduce(0) { $0 | Int(batch[$1]) << (8 * $1) }
        let index = (0 ..< 4).reduce(0) { $0 | Int(batch[4 + $1]) << (8 * $1) }
        return "origin \(origin) #\(index), \(batch.count) bytes"
    }
}
