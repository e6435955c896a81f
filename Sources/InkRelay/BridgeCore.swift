// Bridging rooms across daemons through a broker: the sans-IO state machine (docs/protocol.md 9).
import InkCodec
import InkProtocol

/// Reads a home daemon's durable log to answer gap and history requests.
public protocol BridgeLogReader: AnyObject {
    /// Records of `room` after `after`, ascending, at most `maxRecords`, stopping once
    /// `maxBytes` of payload are reached (at least one record when there is one).
    func records(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) -> [RelayRecord]
}

public struct BridgeConfiguration: Sendable {
    /// This daemon's id on the broker (unique among the bridged daemons, at most 64 bytes).
    public var daemonID: String
    /// Differs at every start, so forward numbers restart without clashing with the last run's.
    public var incarnation: UInt64
    public var topicPrefix = "inkwire"
    /// How long a new room waits for a retained home claim before claiming it.
    public var claimWait = Instant.Duration.milliseconds(400)
    /// How long a claimant waits after its claim came back before acting as home (a better
    /// claim racing it wins meanwhile).
    public var claimSettle = Instant.Duration.milliseconds(300)
    /// Forwards not yet seen in the home's log are sent again this often.
    public var forwardRetry = Instant.Duration.milliseconds(1000)
    /// The home publishes its durable head this often (followers repair a lost tail by it).
    public var headInterval = Instant.Duration.milliseconds(1000)
    /// A gap in the home's stream is requested after this long.
    public var gapTimeout = Instant.Duration.milliseconds(300)
    /// Least time between two catch-up requests of one room (gap reports aside).
    public var requestRetry = Instant.Duration.milliseconds(1000)
    /// Payload bytes per response chunk (a single larger record goes alone).
    public var chunkBytes = 128 * 1024
    /// Records one request is answered with; the follower asks again for the rest.
    public var maxRecordsPerRequest = 16_384
    /// Forwards a room holds until the home's log shows them (and a home's records waiting to
    /// be durable); the oldest is dropped past it (a device sends its batch again after its
    /// next reconnect; a follower requests a record it missed).
    public var maxPendingForwardsPerRoom = 16_384
    /// Retransmissions of one forward before it is dropped (the home refused it).
    public var maxForwardAttempts = 60
    /// Rooms bridged at once.
    public var maxRooms = 1024
    /// How far a claim that would move a decided room (lead it away from this home, or from a
    /// follower's home) may be ahead of the room's head as this daemon knows it. Beyond it the
    /// claim is implausible (no split broker lasts a million batches) and is refused as
    /// malformed; a home asserts its own claim again.
    public var maxClaimLead: UInt64 = 1 << 20

    public init(daemonID: String, incarnation: UInt64, topicPrefix: String = "inkwire") {
        self.daemonID = daemonID
        self.incarnation = incarnation
        self.topicPrefix = topicPrefix
    }
}

/// What the daemon must do, in order.
public enum BridgeOutput: Hashable, Sendable {
    /// Subscribe (QoS 1; the client resubscribes after reconnects).
    case subscribe(String)
    /// Publish (QoS 1), retained or not. Only emitted while connected.
    case publish(topic: String, payload: [UInt8], retain: Bool)
    /// This daemon is the room's home: `relay.setFollows(room, false)`.
    case lead(room: String)
    /// Another daemon is the room's home: `relay.setFollows(room, true)`.
    case follow(room: String)
    /// The home's next record of a following room: `relay.handleOrdered`.
    case deliverOrdered(RelayRecord)
    /// A forwarded batch, in its forwarder's order, for this home: `relay.handleForwarded`.
    case deliverForwarded(ForwardedBatch)
    case event(BridgeEvent)
}

public enum BridgeEvent: Hashable, Sendable {
    case homeDecided(room: String, home: String, isSelf: Bool)
    /// A better claim reached a room this daemon led (a race or a split broker).
    case homeConflict(room: String, other: String)
    case malformed(topic: String, BridgeWireError)
    case gapRequested(room: String, from: UInt64, through: UInt64)
    case forwardDropped(room: String, origin: UInt64, originSeq: UInt64)
}

public struct BridgeMetrics: Equatable, Sendable {
    public var published = 0
    public var publishedBytes = 0
    public var received = 0
    public var malformed = 0
    /// Copies dropped because the record or forward was already had (broker duplicates, two
    /// paths, answers to a request already filled).
    public var duplicatesDropped = 0
    /// Largest distance ahead of the next expected number seen on arrival.
    public var reorderDepthMax: UInt64 = 0
    /// Records held now behind a gap.
    public var reorderHeld = 0
    public var gapsRequested = 0
    /// Records delivered that came from a response (gap repair or history sync).
    public var gapRepairs = 0
    public var forwardsRetransmitted = 0
    public var requestsServed = 0
    public init() {}
}

/// One daemon's bridge: decides each room's home, forwards local batches to it, orders the
/// home's stream for the relay, repairs gaps and answers requests from the durable log.
///
/// ## Call order (the daemon)
/// `openRoom` for every room the relay holds (after restore) and creates (`.roomCreated`);
/// `handleConnected`/`handleDisconnected` as the broker connection comes and goes;
/// `handleMessage` for every broker message; after every relay drain, `handleForward` for each
/// `relay.pollForward()`, `handleAppended` for each `.append` and `handleDurable` when the
/// store commits; `handleTimeout` when `pollTimeout()` passes. After every input drain
/// `pollOutput()` and act on each output in order (relay calls included).
public final class BridgeCore {
    public let configuration: BridgeConfiguration
    public let topics: BridgeTopics
    public private(set) var metrics = BridgeMetrics()
    public private(set) var connected = false
    private let log: BridgeLogReader

    enum Role: Equatable {
        case discovering(since: Instant)
        case claiming(since: Instant, echoed: Instant?)
        case home
        case follower(String)
    }

    struct PendingForward {
        var seq: UInt64
        var batch: ForwardedBatch
        var attempts: Int
    }

    struct RoomBridge {
        var role: Role
        /// Follower: the last record delivered to the relay. Home: the last appended.
        var head: UInt64
        /// Home: the last record published (durable).
        var published: UInt64
        var unpublished: [RelayRecord] = []
        var nextForwardSeq: UInt64 = 1
        var pending: [PendingForward] = []
        var retryAt: Instant?
        var lastRequestAt: Instant?
        var knownHomeHead: UInt64 = 0
        var nextHeadAt: Instant?
        var subscribedAsHome = false
        /// The best claim seen (a follower's home's), to tell a stale claim from a new home.
        var bestClaim: BridgeClaim?
    }

    private var rooms: [String: RoomBridge] = [:]
    private var logBuffer: ReorderBuffer<String, RelayRecord>
    private var forwardBuffer: ReorderBuffer<String, ForwardedBatch>
    /// The forward stream (`forwardBuffer` key) each forwarding daemon of a led room uses now,
    /// by `room NUL daemon`. A forwarder's new incarnation replaces its old stream and a room
    /// no longer led here forgets its streams, so restarts do not pile up streams until the
    /// buffer's table of origins (`maxOrigins`) is full and every new stream is refused.
    private var forwardStreams: [String: String] = [:]
    private var outputs: [BridgeOutput] = []
    private var outputHead = 0

    public init(configuration: BridgeConfiguration, log: BridgeLogReader) {
        self.configuration = configuration
        self.topics = BridgeTopics(prefix: configuration.topicPrefix)
        self.log = log
        var rc = ReorderBuffer<String, RelayRecord>.Configuration()
        rc.firstSequence = 1
        rc.gapTimeout = configuration.gapTimeout
        logBuffer = ReorderBuffer(configuration: rc)
        var fc = ReorderBuffer<String, ForwardedBatch>.Configuration()
        fc.firstSequence = 1
        fc.gapTimeout = configuration.forwardRetry
        forwardBuffer = ReorderBuffer(configuration: fc)
    }

    var me: String { configuration.daemonID }

    // MARK: reading

    public var roomNames: [String] { rooms.keys.sorted() }
    /// The room's home daemon, when decided.
    public func home(of room: String) -> String? {
        switch rooms[room]?.role {
        case .home: me
        case .follower(let h): h
        default: nil
        }
    }
    public func pendingForwards(_ room: String) -> Int { rooms[room]?.pending.count ?? 0 }

    // MARK: outputs

    public func pollOutput() -> BridgeOutput? {
        guard outputHead < outputs.count else { return nil }
        let o = outputs[outputHead]
        outputHead += 1
        if outputHead == outputs.count {
            outputs.removeAll(keepingCapacity: true)
            outputHead = 0
        }
        return o
    }

    public func pollTimeout() -> Instant? {
        var earliest = [logBuffer.pollTimeout(), forwardBuffer.pollTimeout()].compactMap { $0 }.min()
        func consider(_ t: Instant?) {
            guard let t else { return }
            if earliest == nil || t < earliest! { earliest = t }
        }
        for r in rooms.values {
            switch r.role {
            case .discovering(let since): if connected { consider(since + configuration.claimWait) }
            case .claiming(let since, let echoed):
                if let echoed { consider(echoed + configuration.claimSettle) } else if connected { consider(since + configuration.claimWait) }
            case .home: if connected { consider(r.nextHeadAt) }
            case .follower: if connected && !r.pending.isEmpty { consider(r.retryAt) }
            }
        }
        return earliest
    }

    private func publish(_ topic: String, _ message: BridgeMessage, retain: Bool = false) {
        guard connected else { return }
        let bytes = BridgeWire.encode(message)
        metrics.published += 1
        metrics.publishedBytes += bytes.count
        outputs.append(.publish(topic: topic, payload: bytes, retain: retain))
    }

    private func event(_ e: BridgeEvent) { outputs.append(.event(e)) }

    // MARK: inputs

    /// A room the relay holds: restored at start (`head` its durable head) or just created.
    /// Opening a room again (the relay forgot it, e.g. idle expiry, and made it anew) starts
    /// it over from `head`.
    public func openRoom(_ room: String, head: UInt64, now: Instant) {
        if let old = rooms[room] {
            var fresh = RoomBridge(role: .discovering(since: now), head: head, published: head)
            fresh.subscribedAsHome = old.subscribedAsHome
            rooms[room] = fresh
            logBuffer.forget(room)
            forgetForwardStreams(room)
            logBuffer.expect(room, next: head + 1)
            return
        }
        guard rooms.count < configuration.maxRooms else { return }
        rooms[room] = RoomBridge(role: .discovering(since: now), head: head, published: head)
        logBuffer.expect(room, next: head + 1)
        outputs.append(.subscribe(topics.home(room)))
        outputs.append(.subscribe(topics.log(room)))
        outputs.append(.subscribe(topics.response(room, daemon: me)))
    }

    public func handleConnected(now: Instant) {
        connected = true
        for name in rooms.keys.sorted() {
            switch rooms[name]!.role {
            case .discovering, .claiming:
                // Subscriptions go out again: wait for the retained claim anew.
                rooms[name]!.role = .discovering(since: now)
            case .home:
                // The broker may have lost the retained claim (restarted without persistence).
                publish(topics.home(name), .claim(room: name, myClaim(name)), retain: true)
                rooms[name]!.nextHeadAt = now
            case .follower:
                retransmit(name, now: now)
                requestCatchUp(name, now: now, force: true)
            }
        }
    }

    public func handleDisconnected(now: Instant) {
        connected = false
    }

    /// A batch a following room of the relay accepted from a local member (`pollForward`).
    public func handleForward(_ batch: ForwardedBatch, now: Instant) {
        if rooms[batch.room] == nil { openRoom(batch.room, head: 0, now: now) }
        guard var r = rooms[batch.room] else { return }
        if r.role == .home {
            outputs.append(.deliverForwarded(batch))
            return
        }
        if r.pending.contains(where: { $0.batch.origin == batch.origin && $0.batch.originSeq == batch.originSeq }) { return }
        let seq = r.nextForwardSeq
        r.nextForwardSeq += 1
        if r.pending.count >= configuration.maxPendingForwardsPerRoom {
            let dropped = r.pending.removeFirst()
            event(.forwardDropped(room: batch.room, origin: dropped.batch.origin, originSeq: dropped.batch.originSeq))
        }
        r.pending.append(PendingForward(seq: seq, batch: batch, attempts: 1))
        if r.retryAt == nil { r.retryAt = now + configuration.forwardRetry }
        let floor = r.pending[0].seq
        rooms[batch.room] = r
        if case .follower = r.role {
            publish(topics.forward(batch.room, daemon: me),
                    .forward(daemon: me, incarnation: configuration.incarnation, forwardSeq: seq, floor: floor, batch))
        }
    }

    /// The relay appended `record` (`.append` output). Only a home's records are published,
    /// once durable.
    public func handleAppended(_ record: RelayRecord) {
        guard var r = rooms[record.room], r.role == .home else { return }
        // Bounded while the store does not confirm: followers repair what is dropped by request.
        if r.unpublished.count >= configuration.maxPendingForwardsPerRoom { r.unpublished.removeFirst() }
        r.unpublished.append(record)
        r.head = max(r.head, record.roomSeq)
        rooms[record.room] = r
    }

    /// The store made `room` durable up to `roomSeq`: a home publishes those records now.
    public func handleDurable(room: String, upTo roomSeq: UInt64, now: Instant) {
        guard var r = rooms[room], r.role == .home else { return }
        var n = 0
        while n < r.unpublished.count && r.unpublished[n].roomSeq <= roomSeq {
            publish(topics.log(room), .record(r.unpublished[n]))
            r.published = max(r.published, r.unpublished[n].roomSeq)
            n += 1
        }
        r.unpublished.removeFirst(n)
        rooms[room] = r
    }

    public func handleTimeout(now: Instant) {
        logBuffer.handleTimeout(now: now)
        forwardBuffer.handleTimeout(now: now)
        drainBuffers(now: now, fromResponse: false)
        for name in rooms.keys.sorted() {
            let r = rooms[name]!
            switch r.role {
            case .discovering(let since):
                guard connected, !(now < since + configuration.claimWait) else { continue }
                publish(topics.home(name), .claim(room: name, myClaim(name)), retain: true)
                rooms[name]!.role = .claiming(since: now, echoed: nil)
            case .claiming(let since, let echoed):
                if let echoed {
                    if !(now < echoed + configuration.claimSettle) { becomeHome(name, now: now) }
                } else if connected && !(now < since + configuration.claimWait) {
                    publish(topics.home(name), .claim(room: name, myClaim(name)), retain: true)
                    rooms[name]!.role = .claiming(since: now, echoed: nil)
                }
            case .home:
                guard connected, let at = r.nextHeadAt, !(now < at) else { continue }
                publish(topics.log(name), .head(room: name, daemon: me, roomSeq: r.published))
                rooms[name]!.nextHeadAt = now + configuration.headInterval
            case .follower:
                guard connected, let at = r.retryAt, !(now < at) else { continue }
                retransmit(name, now: now)
            }
        }
    }

    /// One message from the broker.
    public func handleMessage(topic: String, payload: [UInt8], now: Instant) {
        let message: BridgeMessage
        do {
            message = try BridgeWire.decode(payload)
        } catch {
            // An empty retained message clears a claim: nothing to act on.
            if !payload.isEmpty {
                metrics.malformed += 1
                event(.malformed(topic: topic, error))
            }
            return
        }
        metrics.received += 1
        switch message {
        case .claim(let room, let claim): handleClaim(room, claim, topic: topic, now: now)
        case .forward(let daemon, let incarnation, let seq, let floor, let batch):
            guard daemon != me, rooms[batch.room]?.role == .home else { return }
            let stream = batch.room + "\u{0}" + daemon, key = stream + "\u{0}" + String(incarnation)
            if let old = forwardStreams[stream], old != key {
                // The forwarder restarted: its old numbers are over (a late copy of one that
                // comes back starts that stream again from its floor; the relay drops repeats).
                forwardBuffer.forget(old)
            } else if forwardStreams[stream] == nil, forwardStreams.count >= forwardBuffer.configuration.maxOrigins {
                return
            }
            forwardStreams[stream] = key
            forwardBuffer.expect(key, next: floor)
            if forwardBuffer.insert(batch, origin: key, sequence: seq, now: now) == .duplicate { metrics.duplicatesDropped += 1 }
            drainBuffers(now: now, fromResponse: false)
        case .record(let record):
            guard var r = rooms[record.room], r.role != .home else { return }
            guard Self.payloadDecodes(record) else {
                refuse(topic: topic, .badValue("record payload"))
                return
            }
            r.knownHomeHead = max(r.knownHomeHead, record.roomSeq)
            rooms[record.room] = r
            insertRecord(record, now: now)
            drainBuffers(now: now, fromResponse: false)
            if record.roomSeq > logBuffer.nextExpected(from: record.room) + logBuffer.configuration.maxAhead {
                requestCatchUp(record.room, now: now, force: false)
            }
        case .head(let room, let daemon, let seq):
            // Only the home's own head says how far its log reaches.
            guard var r = rooms[room], case .follower(let home) = r.role, daemon == home else { return }
            r.knownHomeHead = max(r.knownHomeHead, seq)
            rooms[room] = r
            requestCatchUp(room, now: now, force: false)
        case .request(let room, let requester, let from, let through):
            guard rooms[room]?.role == .home, requester != me else { return }
            serve(room, requester: requester, from: from, through: through)
        case .response(let room, let records):
            guard rooms[room] != nil, rooms[room]!.role != .home else { return }
            for record in records {
                guard Self.payloadDecodes(record) else {
                    refuse(topic: topic, .badValue("record payload"))
                    continue
                }
                insertRecord(record, now: now)
            }
            drainBuffers(now: now, fromResponse: true)
            // A long history comes in several requests: ask for the rest at once.
            if let last = records.last, rooms[room]!.head >= last.roomSeq, rooms[room]!.knownHomeHead > last.roomSeq {
                requestCatchUp(room, now: now, force: true)
            }
        }
    }

    // MARK: internals

    /// A well-formed message this daemon will not act on: counted and reported as malformed.
    private func refuse(topic: String, _ error: BridgeWireError) {
        metrics.malformed += 1
        event(.malformed(topic: topic, error))
    }

    /// Whether a record's payload is a batch the relay can take. A record that is not would
    /// take its number in the replica's order and stall the room behind it (the relay refuses
    /// it), so it is dropped here and the home's own copy fills the number.
    static func payloadDecodes(_ record: RelayRecord) -> Bool {
        var state = BinaryCodecState()
        return (try? BinaryBatchCodec.decode(record.payload, state: &state)) != nil
    }

    /// A claim that would move a decided room must be within `maxClaimLead` of the room's head
    /// as this daemon knows it (a claim while discovering or claiming is taken as it is).
    private func isPlausible(_ claim: BridgeClaim, _ r: RoomBridge) -> Bool {
        let known: UInt64
        switch r.role {
        case .home: known = max(r.head, r.published)
        case .follower: known = max(r.head, r.knownHomeHead, r.bestClaim?.head ?? 0)
        case .discovering, .claiming: return true
        }
        return claim.head <= known || claim.head - known <= configuration.maxClaimLead
    }

    private func myClaim(_ room: String) -> BridgeClaim {
        BridgeClaim(daemon: me, head: rooms[room].map { max($0.head, $0.published) } ?? 0)
    }

    private func handleClaim(_ room: String, _ claim: BridgeClaim, topic: String, now: Instant) {
        guard let r = rooms[room] else { return }
        if claim.daemon != me, !isPlausible(claim, r) {
            refuse(topic: topic, .badValue("claim head"))
            // The retained claim must end up the home's again.
            if r.role == .home { publish(topics.home(room), .claim(room: room, myClaim(room)), retain: true) }
            return
        }
        if claim.daemon != me, r.bestClaim.map({ claim.daemon == $0.daemon || claim.beats($0) }) ?? true {
            rooms[room]!.bestClaim = claim
        }
        switch r.role {
        case .discovering:
            // Its own claim from before a restart: it may have lost a race it was in, so it
            // settles like a fresh claim (a better claimant re-asserts meanwhile).
            if claim.daemon == me {
                rooms[room]!.role = .claiming(since: now, echoed: now)
            } else {
                becomeFollower(room, home: claim.daemon, now: now)
            }
        case .claiming(let since, let echoed):
            if claim.daemon == me {
                if echoed == nil { rooms[room]!.role = .claiming(since: since, echoed: now) }
            } else if claim.beats(myClaim(room)) {
                becomeFollower(room, home: claim.daemon, now: now)
            } else {
                // The retained claim must end up the winner's.
                publish(topics.home(room), .claim(room: room, myClaim(room)), retain: true)
            }
        case .home:
            guard claim.daemon != me else { return }
            if claim.beats(myClaim(room)) {
                event(.homeConflict(room: room, other: claim.daemon))
                becomeFollower(room, home: claim.daemon, now: now)
            } else {
                publish(topics.home(room), .claim(room: room, myClaim(room)), retain: true)
            }
        case .follower(let home):
            // Only a claim that beats the home's moves the room (a late copy of this daemon's
            // own claim from before it followed does not).
            guard claim.daemon != home else { return }
            if let best = r.bestClaim, !claim.beats(best) { return }
            if claim.daemon == me { becomeHome(room, now: now) } else { becomeFollower(room, home: claim.daemon, now: now) }
        }
    }

    private func becomeHome(_ room: String, now: Instant) {
        guard var r = rooms[room] else { return }
        r.role = .home
        r.published = max(r.published, r.head)
        r.nextHeadAt = now
        let pending = r.pending
        r.pending = []
        r.retryAt = nil
        let subscribe = !r.subscribedAsHome
        r.subscribedAsHome = true
        rooms[room] = r
        logBuffer.forget(room)
        if subscribe {
            outputs.append(.subscribe(topics.forwards(room)))
            outputs.append(.subscribe(topics.request(room)))
        }
        outputs.append(.lead(room: room))
        event(.homeDecided(room: room, home: me, isSelf: true))
        publish(topics.home(room), .claim(room: room, myClaim(room)), retain: true)
        for p in pending { outputs.append(.deliverForwarded(p.batch)) }
    }

    private func becomeFollower(_ room: String, home: String, now: Instant) {
        guard var r = rooms[room] else { return }
        let wasHome = r.role == .home
        r.role = .follower(home)
        if wasHome {
            r.unpublished = []
            forgetForwardStreams(room)
        }
        rooms[room] = r
        logBuffer.expect(room, next: r.head + 1)
        outputs.append(.follow(room: room))
        event(.homeDecided(room: room, home: home, isSelf: false))
        retransmit(room, now: now)
        requestCatchUp(room, now: now, force: true)
    }

    private func retransmit(_ room: String, now: Instant) {
        guard connected, var r = rooms[room], case .follower = r.role else { return }
        var kept: [PendingForward] = []
        for var p in r.pending {
            if p.attempts >= configuration.maxForwardAttempts {
                event(.forwardDropped(room: room, origin: p.batch.origin, originSeq: p.batch.originSeq))
                continue
            }
            p.attempts += 1
            kept.append(p)
        }
        r.pending = kept
        r.retryAt = kept.isEmpty ? nil : now + configuration.forwardRetry
        rooms[room] = r
        guard let floor = kept.first?.seq else { return }
        for p in kept {
            metrics.forwardsRetransmitted += 1
            publish(topics.forward(room, daemon: me),
                    .forward(daemon: me, incarnation: configuration.incarnation, forwardSeq: p.seq, floor: floor, p.batch))
        }
    }

    private func forgetForwardStreams(_ room: String) {
        let prefix = room + "\u{0}"
        for stream in forwardStreams.keys.sorted() where stream.hasPrefix(prefix) {
            forwardBuffer.forget(forwardStreams.removeValue(forKey: stream)!)
        }
    }

    /// Asks the home for everything after the follower's head (it clamps to its own head).
    private func requestCatchUp(_ room: String, now: Instant, force: Bool) {
        guard connected, var r = rooms[room], case .follower = r.role else { return }
        if !force {
            guard r.knownHomeHead > r.head else { return }
            if let last = r.lastRequestAt, now < last + configuration.requestRetry { return }
        }
        r.lastRequestAt = now
        rooms[room] = r
        publish(topics.request(room), .request(room: room, requester: me, from: r.head + 1, through: UInt64.max))
    }

    private func insertRecord(_ record: RelayRecord, now: Instant) {
        if logBuffer.insert(record, origin: record.room, sequence: record.roomSeq, now: now) == .duplicate {
            metrics.duplicatesDropped += 1
        }
    }

    private func serve(_ room: String, requester: String, from: UInt64, through: UInt64) {
        guard let r = rooms[room] else { return }
        let last = min(through, r.published)
        var next = max(from, 1)
        var sent = 0
        metrics.requestsServed += 1
        while next <= last && sent < configuration.maxRecordsPerRequest {
            let want = min(BridgeWire.maxRecordsPerResponse, configuration.maxRecordsPerRequest - sent)
            let records = log.records(room: room, after: next - 1, maxRecords: want, maxBytes: configuration.chunkBytes)
                .filter { $0.roomSeq >= next && $0.roomSeq <= last }
            guard let tail = records.last else { break }
            publish(topics.response(room, daemon: requester), .response(room: room, records: records))
            sent += records.count
            next = tail.roomSeq + 1
        }
    }

    private func drainBuffers(now: Instant, fromResponse: Bool) {
        while let e = logBuffer.pollEvent() {
            switch e {
            case .released(let room, _, let record):
                guard var r = rooms[room], r.role != .home else { continue }
                r.head = record.roomSeq
                r.knownHomeHead = max(r.knownHomeHead, record.roomSeq)
                let before = r.pending.count
                r.pending.removeAll { $0.batch.origin == record.origin && $0.batch.originSeq <= record.originSeq }
                if r.pending.isEmpty { r.retryAt = nil } else if r.pending.count != before { r.retryAt = now + configuration.forwardRetry }
                rooms[room] = r
                if fromResponse { metrics.gapRepairs += 1 }
                outputs.append(.deliverOrdered(record))
            case .missing(let room, let ranges):
                guard connected, let first = ranges.first, let lastRange = ranges.last, case .follower = rooms[room]?.role else { continue }
                metrics.gapsRequested += 1
                rooms[room]!.lastRequestAt = now
                event(.gapRequested(room: room, from: first.lowerBound, through: lastRange.upperBound))
                publish(topics.request(room), .request(room: room, requester: me, from: first.lowerBound, through: lastRange.upperBound))
            }
        }
        while let e = forwardBuffer.pollEvent() {
            if case .released(_, _, let batch) = e, rooms[batch.room]?.role == .home {
                outputs.append(.deliverForwarded(batch))
            }
        }
        metrics.reorderDepthMax = max(logBuffer.metrics.maxDepth, forwardBuffer.metrics.maxDepth)
        metrics.reorderHeld = logBuffer.metrics.buffered + forwardBuffer.metrics.buffered
    }
}
