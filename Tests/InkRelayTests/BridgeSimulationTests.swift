import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// Seeded runs of two or three bridged daemons (real `Relay`s and `BridgeCore`s) through a
/// chaotic broker: every watcher on every daemon gets exactly the sent batches, once each, in
/// the home's room order, and every daemon's log equals the home's.
struct BridgeSimulationTests {
    struct Outcome {
        var failures: [String] = []
        var records = 0
        var reorderDepthMax: UInt64 = 0
        var duplicatesDropped = 0
        var gapRepairs = 0
    }

    /// One run: senders on daemons a and b, a watcher on each daemon; some seeds restart the
    /// broker mid-lesson (retained claims lost) and start a third daemon late.
    static func run(seed: UInt64) -> Outcome {
        var random = BridgeRandom(seed: seed ^ 0xB81D6E)
        let broker = ChaosBroker(seed: seed, maxDelayMs: 1 + random.below(150), duplicatePercent: random.below(30),
                                 dropPercent: random.below(15))
        var now = Instant.zero
        var daemons = [SimBridgedDaemon(name: "a", incarnation: random.next(), broker: broker, now: now),
                       SimBridgedDaemon(name: "b", incarnation: random.next(), broker: broker, now: now)]
        let lateStart: Instant? = random.chance(50) ? Instant.zero + .milliseconds(random.below(4000)) : nil
        let restartAt: Instant? = random.chance(40) ? Instant.zero + .milliseconds(200 + random.below(3000)) : nil
        let reconnectAfter = Instant.Duration.milliseconds(50 + random.below(800))
        // Daemon b (home or follower) crashes and restarts from its durable log.
        let crashAt: Instant? = random.chance(40) ? Instant.zero + .milliseconds(300 + random.below(2500)) : nil
        var crashed = false
        var stoppedWatchers: Set<Int> = []
        var rejoined: Device?
        var reconnectAt: Instant?

        // Devices: (daemon index, device). Senders draw strokes; watchers only watch.
        var senders: [(Int, Device)] = []
        var watchers: [(Int, Device)] = []
        var nextSession: UInt64 = 1
        func open(_ d: Int, _ user: String, _ role: MemberRole, origin: UInt64) -> Device {
            let s = SessionID(nextSession)
            nextSession += 1
            daemons[d].relay.handleSessionOpened(s, transport: .udp, now: now)
            var device = Device(s, origin: origin, user: user, role: role)
            daemons[d].relay.handleMessage(SessionMessageCodec.encode(device.join()), from: s, now: now)
            daemons[d].drain(now: now)
            _ = device.apply(daemons[d].take(s))
            return device
        }
        func reopen(_ d: Int, _ old: Device) -> Device {
            var device = open(d, old.user, old.role, origin: old.origin)
            device.nextOriginSeq = old.nextOriginSeq
            device.nextStroke = old.nextStroke
            return device
        }
        senders.append((0, open(0, "teacher", .teacher, origin: 101)))
        senders.append((1, open(1, "pupil", .presenter, origin: 202)))
        senders.append((0, open(0, "pupil2", .presenter, origin: 303)))
        // The third sender also reaches the room through daemon b (LAN and IM at once): the
        // same batches, same numbers, on both paths; the first copy to reach the home wins.
        var mirror = open(1, "pupil2", .presenter, origin: 303)
        watchers.append((0, open(0, "w-a", .viewer, origin: 901)))
        watchers.append((1, open(1, "w-b", .viewer, origin: 902)))

        let batchesPerSender = 10 + Int(random.below(30))
        var schedule: [(at: Instant, sender: Int)] = []
        for s in senders.indices {
            var t = Instant.zero + .milliseconds(random.below(300))
            for _ in 0..<batchesPerSender {
                schedule.append((t, s))
                t = t + .milliseconds(1 + random.below(120))
            }
        }
        schedule.sort { ($0.at, $0.sender) < ($1.at, $1.sender) }
        var scheduleHead = 0
        var sent: [(origin: UInt64, originSeq: UInt64, commands: [TimedCommand])] = []
        var received: [Int: [(UInt64, [TimedCommand])]] = [:]  // watcher index -> (roomSeq, commands)
        var acked: [Int: UInt64] = [:]
        let deadline = Instant.zero + .milliseconds(60_000)
        let total = senders.count * batchesPerSender
        var outcome = Outcome()

        func collect() {
            if var device = rejoined {
                let acks = device.apply(daemons[1].take(device.session))
                for ack in acks { daemons[1].relay.handleMessage(SessionMessageCodec.encode(ack), from: device.session, now: now) }
                if !acks.isEmpty { daemons[1].drain(now: now) }
                rejoined = device
            }
            for (i, w) in watchers.enumerated() where !stoppedWatchers.contains(i) {
                var device = w.1
                for m in daemons[w.0].take(device.session) {
                    if case .roomBatch(let rb) = m {
                        let b = try! BinaryBatchCodec.decode(rb.payload, state: &device.inbound)
                        received[i, default: []].append((rb.roomSeq, b.commands))
                    }
                }
                watchers[i].1 = device
            }
            for (i, s) in senders.enumerated() {
                for m in daemons[s.0].take(s.1.session) {
                    if case .batchAck(let originSeq, _) = m { acked[i] = max(acked[i] ?? 0, originSeq) }
                }
            }
        }

        while now < deadline {
            // Done: everything sent, acknowledged, and seen by every watcher.
            if scheduleHead == schedule.count, senders.indices.allSatisfy({ acked[$0] == UInt64(batchesPerSender) }),
               watchers.indices.allSatisfy({ stoppedWatchers.contains($0) || received[$0]?.count == total }), lateStart == nil || daemons.count == 3,
               rejoined.map({ $0.seen.last == UInt64(total) || ($0.lastDigest != nil && $0.board.digest == daemons[1].relay.board("r")?.digest && daemons[1].relay.roomHead("r") == UInt64(total)) }) ?? true {
                break
            }
            var next = deadline
            func consider(_ t: Instant?) { if let t, t < next { next = t } }
            if scheduleHead < schedule.count { consider(schedule[scheduleHead].at) }
            consider(broker.nextAt)
            for d in daemons { consider(d.core.pollTimeout()) }
            if daemons.count == 2 { consider(lateStart) }
            consider(restartAt.flatMap { now < $0 ? $0 : nil })
            consider(reconnectAt)
            if !crashed { consider(crashAt) }
            now = max(now, next)

            if let r = restartAt, r == now {
                broker.restart()
                for d in daemons { d.core.handleDisconnected(now: now); d.drain(now: now) }
                reconnectAt = now + reconnectAfter
            }
            if let r = reconnectAt, !(now < r) {
                reconnectAt = nil
                for d in daemons {
                    broker.reconnect(d.client, now: now)
                    d.core.handleConnected(now: now)
                    d.drain(now: now)
                }
            }
            if let c = crashAt, !crashed, !(now < c) {
                crashed = true
                daemons[1].restart(incarnation: random.next(), now: now)
                // Its devices come back: senders rejoin and send what was not acknowledged
                // again (same numbers, new codec state); a new watcher joins with nothing.
                for i in senders.indices where senders[i].0 == 1 {
                    var device = senders[i].1
                    device = reopen(1, device)
                    for seq in ((acked[i] ?? 0) + 1)..<device.nextOriginSeq {
                        let commands = sent.first { $0.origin == device.origin && $0.originSeq == seq }!.commands
                        let message = device.batch(commands, originSeq: seq)
                        daemons[1].relay.handleMessage(SessionMessageCodec.encode(message), from: device.session, now: now)
                        daemons[1].drain(now: now)
                    }
                    senders[i].1 = device
                }
                mirror = reopen(1, mirror)
                for i in watchers.indices where watchers[i].0 == 1 { stoppedWatchers.insert(i) }
                rejoined = open(1, "w-b2", .viewer, origin: 904)
            }
            if let l = lateStart, daemons.count == 2, !(now < l) {
                let c = SimBridgedDaemon(name: "c", incarnation: random.next(), broker: broker, now: now)
                if !broker.connected[0] { broker.connected[c.client] = false; c.core.handleDisconnected(now: now) }
                daemons.append(c)
                watchers.append((2, open(2, "w-c", .viewer, origin: 903)))
            }
            while scheduleHead < schedule.count && !(now < schedule[scheduleHead].at) {
                let s = schedule[scheduleHead].sender
                scheduleHead += 1
                var device = senders[s].1
                let (message, commands) = device.stroke(points: 1 + Int(random.below(8)), x: Int32(s * 1000))
                senders[s].1 = device
                if case .batch(let originSeq, _) = message { sent.append((device.origin, originSeq, commands)) }
                let d = daemons[senders[s].0]
                d.relay.handleMessage(SessionMessageCodec.encode(message), from: device.session, now: now)
                d.drain(now: now)
                if device.origin == mirror.origin {
                    let copy = mirror.batch(commands)
                    daemons[1].relay.handleMessage(SessionMessageCodec.encode(copy), from: mirror.session, now: now)
                    daemons[1].drain(now: now)
                }
            }
            for delivery in broker.due(now) {
                let d = daemons.first { $0.client == delivery.client }!
                d.core.handleMessage(topic: delivery.topic, payload: delivery.payload, now: now)
                d.drain(now: now)
            }
            for d in daemons {
                if let t = d.core.pollTimeout(), !(now < t) {
                    d.core.handleTimeout(now: now)
                    d.drain(now: now)
                }
            }
            collect()
        }

        // The home and its log.
        let homes = daemons.map { $0.core.home(of: "r") }
        guard let homeName = homes[0], homes.allSatisfy({ $0 == homeName }) else {
            outcome.failures.append("daemons disagree on the home: \(homes)")
            return outcome
        }
        let home = daemons.first { $0.name == homeName }!
        let log = home.log["r"] ?? []
        outcome.records = log.count
        if log.count != total { outcome.failures.append("home log has \(log.count) records, \(total) sent") }
        var byOrigin: [UInt64: [UInt64]] = [:]
        for r in log { byOrigin[r.origin, default: []].append(r.originSeq) }
        for (origin, seqs) in byOrigin.sorted(by: { $0.key < $1.key }) where seqs != Array(1...UInt64(seqs.count)) {
            outcome.failures.append("origin \(origin) in the home log: \(seqs)")
        }
        let sentByKey = Dictionary(uniqueKeysWithValues: sent.map { ("\($0.origin)/\($0.originSeq)", $0.commands) })
        for r in log {
            var fresh = BinaryCodecState()
            let commands = (try? BinaryBatchCodec.decode(r.payload, state: &fresh).commands) ?? []
            if sentByKey["\(r.origin)/\(r.originSeq)"] != commands { outcome.failures.append("record \(r.roomSeq) differs from what was sent") }
        }
        for d in daemons where d !== home {
            let other = d.log["r"] ?? []
            if other != log { outcome.failures.append("daemon \(d.name) log (\(other.count)) differs from the home's (\(log.count))") }
        }
        for d in daemons where d.events.contains(where: { if case .homeConflict = $0 { true } else { false } }) {
            outcome.failures.append("\(d.name) saw a home conflict")
        }
        for d in daemons where !d.orderedRefusals.isEmpty { outcome.failures.append("\(d.name) refused ordered records: \(d.orderedRefusals.prefix(3))") }
        if let device = rejoined {
            let live = device.seen.filter { $0 != 0 }
            if device.board.digest != home.relay.board("r")?.digest { outcome.failures.append("the watcher joining b after its restart has another board") }
            if let first = live.first, live != Array(first...(first + UInt64(live.count) - 1)) { outcome.failures.append("rejoined watcher saw \(live.prefix(8))...") }
        }
        for (i, w) in watchers.enumerated() {
            let got = received[i] ?? []
            if stoppedWatchers.contains(i) {
                let want = log.prefix(got.count).map(\.roomSeq)
                if got.map(\.0) != Array(want) { outcome.failures.append("watcher \(w.1.user) before the crash got \(got.prefix(5).map(\.0))...") }
                continue
            }
            let want = log.map { r -> (UInt64, [TimedCommand]) in
                var fresh = BinaryCodecState()
                return (r.roomSeq, try! BinaryBatchCodec.decode(r.payload, state: &fresh).commands)
            }
            if got.map(\.0) != want.map(\.0) || got.map(\.1) != want.map(\.1) {
                outcome.failures.append("watcher \(w.1.user) got \(got.count) batches (seqs \(got.prefix(5).map(\.0))...), want \(want.count)")
            }
        }
        for (i, s) in senders.enumerated() where acked[i] != UInt64(batchesPerSender) {
            outcome.failures.append("sender \(s.1.user) acknowledged up to \(acked[i] ?? 0) of \(batchesPerSender)")
        }
        for d in daemons {
            outcome.reorderDepthMax = max(outcome.reorderDepthMax, d.core.metrics.reorderDepthMax)
            outcome.duplicatesDropped += d.core.metrics.duplicatesDropped
            outcome.gapRepairs += d.core.metrics.gapRepairs
        }
        return outcome
    }

    @Test func manySeedsDeliverExactlyInRoomOrder() {
        var depth: UInt64 = 0, duplicates = 0, repairs = 0
        for seed in UInt64(1)...40 {
            let outcome = BridgeSimulationTests.run(seed: seed)
            #expect(outcome.failures.isEmpty, "seed \(seed): \(outcome.failures.prefix(4).joined(separator: "; "))")
            if !outcome.failures.isEmpty { break }
            depth = max(depth, outcome.reorderDepthMax)
            duplicates += outcome.duplicatesDropped
            repairs += outcome.gapRepairs
        }
        // The chaos really happened.
        print("bridge simulation seeds 1-40: reorder depth max \(depth), duplicates dropped \(duplicates), records repaired \(repairs)")
        #expect(depth > 1 && duplicates > 0 && repairs > 0)
    }
}
