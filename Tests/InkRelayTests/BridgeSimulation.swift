import InkCodec
import InkProtocol
@testable import InkRelay

/// A small deterministic random source for the bridge simulation.
struct BridgeRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: UInt64) -> UInt64 { n == 0 ? 0 : next() % n }
    mutating func chance(_ percent: UInt64) -> Bool { below(100) < percent }
}

/// A broker that reorders (a random delay per delivery), duplicates and drops deliveries
/// (never retained claims, which a real broker keeps), keeps retained messages, and can
/// restart: in-flight messages and retained ones are lost and every client reconnects.
final class ChaosBroker {
    struct Delivery {
        var at: Instant
        var order: UInt64
        var client: Int
        var topic: String
        var payload: [UInt8]
    }
    var random: BridgeRandom
    var maxDelayMs: UInt64
    var duplicatePercent: UInt64
    var dropPercent: UInt64
    var subscriptions: [[String]] = []
    var connected: [Bool] = []
    var retained: [(topic: String, payload: [UInt8])] = []
    var queue: [Delivery] = []
    var order: UInt64 = 0
    var delivered = 0, dropped = 0, duplicated = 0

    init(seed: UInt64, maxDelayMs: UInt64, duplicatePercent: UInt64, dropPercent: UInt64) {
        random = BridgeRandom(seed: seed)
        self.maxDelayMs = maxDelayMs
        self.duplicatePercent = duplicatePercent
        self.dropPercent = dropPercent
    }

    func addClient() -> Int {
        subscriptions.append([])
        connected.append(true)
        return subscriptions.count - 1
    }

    static func matches(_ filter: String, _ topic: String) -> Bool {
        let f = filter.split(separator: "/", omittingEmptySubsequences: false)
        let t = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard f.count == t.count else { return false }
        for (a, b) in zip(f, t) where a != "+" && a != b { return false }
        return true
    }

    private func enqueue(_ client: Int, _ topic: String, _ payload: [UInt8], now: Instant, droppable: Bool) {
        if droppable && random.chance(dropPercent) {
            dropped += 1
            return
        }
        let copies = random.chance(duplicatePercent) ? 2 : 1
        if copies == 2 { duplicated += 1 }
        for _ in 0..<copies {
            order += 1
            let delay = Instant.Duration.milliseconds(1 + random.below(maxDelayMs))
            queue.append(Delivery(at: now + delay, order: order, client: client, topic: topic, payload: payload))
        }
    }

    func subscribe(_ client: Int, _ filter: String, now: Instant) {
        if !subscriptions[client].contains(filter) { subscriptions[client].append(filter) }
        guard connected[client] else { return }
        for r in retained where ChaosBroker.matches(filter, r.topic) {
            enqueue(client, r.topic, r.payload, now: now, droppable: false)
        }
    }

    func publish(from client: Int, _ topic: String, _ payload: [UInt8], retain: Bool, now: Instant) {
        guard connected[client] else { return }
        if retain {
            retained.removeAll { $0.topic == topic }
            if !payload.isEmpty { retained.append((topic, payload)) }
        }
        for c in subscriptions.indices where connected[c] && subscriptions[c].contains(where: { ChaosBroker.matches($0, topic) }) {
            enqueue(c, topic, payload, now: now, droppable: !retain)
        }
    }

    /// Everything in flight and retained is lost; clients are disconnected.
    func restart() {
        queue = []
        retained = []
        for i in connected.indices { connected[i] = false }
    }

    /// The client is back: its subscriptions go out again, retained ones arrive.
    func reconnect(_ client: Int, now: Instant) {
        connected[client] = true
        for f in subscriptions[client] {
            for r in retained where ChaosBroker.matches(f, r.topic) { enqueue(client, r.topic, r.payload, now: now, droppable: false) }
        }
    }

    var nextAt: Instant? { queue.map(\.at).min() }

    /// Takes the deliveries due at `now`, in (time, order) order.
    func due(_ now: Instant) -> [Delivery] {
        let ready = queue.filter { !(now < $0.at) }.sorted { ($0.at, $0.order) < ($1.at, $1.order) }
        queue.removeAll { !(now < $0.at) }
        delivered += ready.count
        return ready.filter { connected[$0.client] }
    }
}

/// One bridged daemon: a bridged `Relay`, its `BridgeCore`, an in-memory durable log, and the
/// sessions of its devices. Appends are durable at once.
final class SimBridgedDaemon: BridgeLogReader {
    let name: String
    let client: Int
    let broker: ChaosBroker
    var relay: Relay
    var core: BridgeCore
    var log: [String: [RelayRecord]] = [:]
    var inbox: [SessionID: [ServerMessage]] = [:]
    var orderedRefusals: [RelayOrderedError] = []
    var events: [BridgeEvent] = []

    init(name: String, incarnation: UInt64, broker: ChaosBroker, now: Instant) {
        self.name = name
        self.broker = broker
        client = broker.addClient()
        relay = Relay(configuration: RelayConfiguration(limits: RelayLimits(), wallClockAtZeroMs: 1_000_000, bridged: true))
        var c = BridgeConfiguration(daemonID: name, incarnation: incarnation)
        c.topicPrefix = "t"
        core = BridgeCore(configuration: c, log: SimLogBox())
        core = BridgeCore(configuration: c, log: self)
        core.handleConnected(now: now)
    }

    /// A crash and restart: the relay comes back from the durable log, the bridge with a new
    /// incarnation and a clean broker session; every session on this daemon is gone.
    func restart(incarnation: UInt64, now: Instant) {
        relay = Relay(configuration: RelayConfiguration(limits: RelayLimits(), wallClockAtZeroMs: 1_000_000, bridged: true))
        for room in log.keys.sorted() {
            for r in log[room]! { try! relay.restore(r) }
        }
        var c = core.configuration
        c.incarnation = incarnation
        core = BridgeCore(configuration: c, log: self)
        inbox = [:]
        broker.subscriptions[client] = []
        broker.queue.removeAll { $0.client == client }
        if broker.connected[client] { core.handleConnected(now: now) }
        for room in relay.roomNames { core.openRoom(room, head: relay.roomHead(room) ?? 0, now: now) }
        drain(now: now)
    }

    func records(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) -> [RelayRecord] {
        guard let all = log[room], after < UInt64(all.count) else { return [] }
        var out: [RelayRecord] = []
        var bytes = 0
        for r in all[Int(after)...] {
            if out.count >= maxRecords || (bytes >= maxBytes && !out.isEmpty) { break }
            out.append(r)
            bytes += r.payload.count
        }
        return out
    }

    func drain(now: Instant) {
        var moved = true
        while moved {
            moved = false
            var durable: [(String, UInt64)] = []
            while let o = relay.pollOutput() {
                moved = true
                switch o {
                case .send(let s, let m): inbox[s, default: []].append(m)
                case .append(let r):
                    log[r.room, default: []].append(r)
                    precondition(UInt64(log[r.room]!.count) == r.roomSeq, "\(name) log out of order")
                    core.handleAppended(r)
                    durable.append((r.room, r.roomSeq))
                case .event(.roomCreated(let room)):
                    core.openRoom(room, head: relay.roomHead(room) ?? 0, now: now)
                case .close, .event, .legacy: break
                }
            }
            for (room, seq) in durable {
                relay.handleDurable(room: room, upTo: seq, now: now)
                core.handleDurable(room: room, upTo: seq, now: now)
            }
            while let f = relay.pollForward() {
                moved = true
                core.handleForward(f, now: now)
            }
            while let o = core.pollOutput() {
                moved = true
                switch o {
                case .subscribe(let f): broker.subscribe(client, f, now: now)
                case .publish(let t, let p, let retain): broker.publish(from: client, t, p, retain: retain, now: now)
                case .lead(let room): relay.setFollows(room, false)
                case .follow(let room): relay.setFollows(room, true)
                case .deliverOrdered(let r):
                    do { try relay.handleOrdered(r, now: now) } catch { orderedRefusals.append(error) }
                case .deliverForwarded(let f): relay.handleForwarded(f, now: now)
                case .event(let e): events.append(e)
                }
            }
        }
    }

    func take(_ s: SessionID) -> [ServerMessage] {
        defer { inbox[s] = [] }
        return inbox[s] ?? []
    }
}

/// Lets `SimBridgedDaemon.init` build its core before `self` exists.
final class SimLogBox: BridgeLogReader {
    func records(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) -> [RelayRecord] { [] }
}
