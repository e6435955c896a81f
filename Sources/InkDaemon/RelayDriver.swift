import InkCodec
import InkProtocol
import InkRelay
import InkStore
import InkUV

/// A transport session as the relay driver sees it: a native UDP (ARQ) session, a native TCP
/// stream or a legacy connection.
protocol RelaySessionTransport: AnyObject {
    /// Sends one relay message to the device: a native transport takes its bytes from
    /// `encoder` (shared with the other members the message fans out to), a legacy one
    /// translates it.
    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder)
    /// The relay has forgotten the session: send what is queued, then close.
    func relayClosed(_ reason: GoingAwayReason)
    /// Where the device is and how its link fares, for the status page.
    var linkStatus: LinkStatus { get }
    /// What a legacy session gets instead of encoded messages (only legacy transports).
    func deliver(legacy delivery: LegacyDelivery)
}

/// A member's link as the status page shows it.
struct LinkStatus {
    var address = "?"
    /// Smoothed round-trip time (the ARQ's, or the kernel's for TCP), ms.
    var rttMs: Double?
    /// The ARQ's datagram loss estimate, or TCP's retransmitted share of segments, percent.
    var lossPercent: Double?
    /// Whether messages to the device are sealed (docs/protocol.md: sealed sessions).
    var sealed = false
}

extension LinkStatus {
    /// From the kernel's TCP_INFO of a stream.
    init(address: SocketAddress?, tcp info: TCPInfo?) {
        self.address = address?.description ?? "?"
        if let info {
            rttMs = Double(info.rttMicroseconds) / 1000
            lossPercent = info.retransmittedPercent
        }
    }
}

extension RelaySessionTransport {
    func deliver(legacy delivery: LegacyDelivery) {}
}

/// Drives the sans-IO `Relay` from the loop: feeds it inputs with `now`, then acts on every
/// output in order (send, append to the store, close, count), and keeps one timer armed at
/// its `pollTimeout`. Re-entrant inputs (a send that fails and closes a session) are queued
/// behind the drain in progress, never nested.
final class RelayDriver {
    let relay: Relay
    private let loop: EventLoop
    private let store: RoomLogStore
    private let logger: Logger
    private let metrics: DaemonMetrics
    let authorizer: DaemonAuthorizer
    private var transports: [SessionID: RelaySessionTransport] = [:]
    private var kinds: [SessionID: TransportKind] = [:]
    private var nextSession: UInt64 = 1
    private var timer: LoopTimer?
    private var draining = false
    /// Sessions with a history sync under way (for the gauge; a session that leaves mid-sync
    /// drops out).
    private var syncing: Set<SessionID> = []
    /// Batches stored per room since its last snapshot; rooms due for one, in order.
    private var sinceSnapshot: [String: Int] = [:]
    private var dueSnapshots: [String] = []
    /// Rooms appended to in the drain under way, and each room's largest stroke count since
    /// its last snapshot (a board that shrank to half of it was cleared or erased).
    private var touchedRooms: [String] = []
    private var peakStrokes: [String: Int] = [:]
    /// Appends to the store, holds what a full backlog refuses, answers the relay's admission.
    let gate: StoreGate
    /// Background images: the store's blobs, checked with SHA-256 and by decoding.
    let blobs: DaemonBlobs
    /// The broker bridge (`--bridge`), told of rooms, appends and durable marks.
    weak var bridge: RelayBridgeHook?
    /// Networks whose sessions no per-address quota counts (`--quota-exempt-networks`).
    private var quotaExemptNetworks: [AddressPrefix] = []
    /// Quota refusals logged once per offender (and quota and room) a minute.
    private let refusalLog = OffenderLog<String>()

    /// A room gets a compacted snapshot (`Relay.snapshotRecord`) every this many stored
    /// batches: a restart restores it and reads only the tail after it, and with
    /// `--retain board` the store drops the batches it covers.
    static let snapshotEveryBatches = 4096
    /// A room whose board fell to half its stroke count (a `clear`, an erase) gets a snapshot
    /// at once if this many batches came since the last one: what came before is no longer
    /// needed by a new viewer.
    static let snapshotAfterShrinkBatches = 16

    init(loop: EventLoop, store: RoomLogStore, logger: Logger, metrics: DaemonMetrics, limits: DaemonLimits, authorizer: DaemonAuthorizer,
         maxRoomHistoryBytes: Int = StoreLimits().maxRoomHistoryBytes, maxBackgroundBytes: Int = StoreLimits().maxBlobBytes,
         bridged: Bool = false) throws(UVError) {
        self.loop = loop
        self.store = store
        self.logger = logger
        self.metrics = metrics
        self.authorizer = authorizer
        var relayLimits = RelayLimits()
        relayLimits.maxRooms = limits.maxRooms
        relayLimits.maxMembersPerRoom = limits.maxMembersPerRoom
        relayLimits.maxSessions = limits.maxSessions + 1024  // legacy connections too
        relayLimits.maxBlobBytes = maxBackgroundBytes
        let wallAtZero = WallClock.milliseconds() &- loop.now / 1000
        relay = Relay(configuration: RelayConfiguration(limits: relayLimits, wallClockAtZeroMs: wallAtZero, bridged: bridged), authorizer: authorizer)
        timer = try LoopTimer(loop: loop)
        gate = StoreGate(store: store, logger: logger, metrics: StoreMetrics(registry: metrics.registry), maxRoomHistoryBytes: maxRoomHistoryBytes)
        relay.admission = gate
        blobs = DaemonBlobs(store: store, logger: logger)
        relay.blobs = blobs
        gate.compactRoom = { [weak self] room in self?.compactNow(room) }
        apply(limits)
    }

    /// The relay's quotas from the daemon's settings.
    static func quotas(_ limits: DaemonLimits) -> RelayQuotas {
        var q = RelayQuotas()
        q.maxSessionsPerUser = limits.maxSessionsPerUser
        q.maxSessionsPerAddress = limits.maxSessionsPerAddress
        q.maxLegacyPerAddress = limits.maxLegacyPerAddress
        q.memberReserve = limits.memberReserve
        q.memberTimeout = limits.memberTimeoutMs == 0 ? nil : .milliseconds(limits.memberTimeoutMs)
        q.idleAfter = .milliseconds(limits.memberIdleMs)
        q.roomsPerAddressPerMinute = limits.roomsPerAddressPerMinute
        q.emptyRoomExpiry = limits.emptyRoomExpiryMs == 0 ? nil : .milliseconds(limits.emptyRoomExpiryMs)
        return q
    }

    /// The settings at start and after each reload: room bounds and quotas for later joins.
    func apply(_ limits: DaemonLimits) {
        relay.updateRoomBounds(maxRooms: limits.maxRooms, maxMembersPerRoom: limits.maxMembersPerRoom)
        relay.updateQuotas(RelayDriver.quotas(limits), now: now)
        quotaExemptNetworks = limits.quotaExemptNetworks
        drain()
    }

    /// The address a session from `address` counts against, nil when no quota counts it.
    func source(of address: SocketAddress?) -> SourceHost? {
        guard let address else { return nil }
        if quotaExemptNetworks.contains(where: { $0.contains(address) }) { return nil }
        return SourceHost(address.unmappedIPv4.host)
    }

    var now: Instant { Instant(microseconds: loop.now) }
    var sessionCount: Int { transports.count }
    var roomCount: Int { relay.roomNames.count }
    var memberCount: Int { relay.roomNames.reduce(0) { $0 + relay.sessions(in: $1).count } }
    func transport(of session: SessionID) -> (RelaySessionTransport, TransportKind)? {
        guard let t = transports[session], let k = kinds[session] else { return nil }
        return (t, k)
    }

    // MARK: start

    /// Rebuilds every room from the store (before any session opens).
    func restoreRooms() {
        for info in store.rooms() {
            var after = info.firstRoomSeq > 0 ? info.firstRoomSeq - 1 : 0
            var restored = 0
            if info.snapshotUptoRoomSeq > 0 {
                do {
                    if let stored = try store.latestSnapshot(room: info.name) {
                        let record = try RoomSnapshotRecord.decode(stored.payload)
                        try relay.restore(snapshot: record)
                        after = max(after, record.throughRoomSeq)
                    }
                } catch {
                    metrics.errors(kind: "restore").increment()
                    logger.error("room snapshot does not restore; the room starts from its log", ["room": info.name, "error": "\(error)"])
                }
            }
            reading: while true {
                let page: TailPage
                do {
                    page = try store.readTail(room: info.name, after: after, maxRecords: 4096, maxBytes: 4 << 20)
                } catch {
                    logger.warning("room history unreadable", ["room": info.name, "error": error])
                    metrics.errors(kind: "store_read").increment()
                    break
                }
                for stored in page.records {
                    let label = RelayRecord.parseAuthorLabel(stored.author)
                    let author = label?.author ?? AuthorID(0)
                    let record = RelayRecord(room: info.name, roomSeq: stored.roomSeq, author: author, user: label?.user ?? stored.author,
                                             origin: stored.origin, originSeq: stored.originSeq, timeMs: stored.receivedAtMs, payload: stored.payload)
                    do {
                        try relay.restore(record)
                        restored += 1
                    } catch {
                        metrics.errors(kind: "restore").increment()
                        logger.error("room history does not restore; the room starts from what came before", ["room": info.name, "room_seq": stored.roomSeq, "error": "\(error)"])
                        break reading
                    }
                }
                after = page.nextAfter
                if page.reachedEnd || page.records.isEmpty { break }
            }
            logger.info("room reopened", ["room": info.name, "batches": restored, "room_seq": info.lastRoomSeq])
        }
    }

    // MARK: inputs

    /// Registers a new session; the relay learns of it at once. A sealed session is opened
    /// unconfirmed and confirmed when its device proves it holds the keys (`confirmed(_:)`).
    /// `address`: where the device is, for the per-address quotas (nil: not counted).
    func open(_ transport: RelaySessionTransport, kind: TransportKind, confirmed: Bool = true, from address: SocketAddress? = nil) -> SessionID {
        let id = SessionID(nextSession)
        nextSession += 1
        transports[id] = transport
        kinds[id] = kind
        relay.handleSessionOpened(id, transport: kind, confirmed: confirmed, source: source(of: address), now: now)
        drain()
        return id
    }

    func confirmed(_ session: SessionID) {
        relay.handleSessionConfirmed(session, now: now)
        drain()
    }

    /// The token secret changed (SIGHUP): members whose token no longer verifies are ended.
    func authorizationChanged() {
        relay.handleAuthorizationChanged(now: now)
        drain()
    }

    func message(_ bytes: [UInt8], from session: SessionID) {
        relay.handleMessage(bytes, from: session, now: now)
        drain()
    }

    func handle(_ message: ClientMessage, from session: SessionID) {
        relay.handle(message, from: session, now: now)
        drain()
    }

    /// A legacy session's commands for its room (model commands: no binary codec on the way).
    func legacyCommands(_ commands: [TimedCommand], originSeq: UInt64, from session: SessionID) {
        relay.handleLegacyCommands(commands, originSeq: originSeq, from: session, now: now)
        drain()
    }

    /// The transport ended on its own (peer gone, timeout, error).
    func transportClosed(_ session: SessionID) {
        guard transports.removeValue(forKey: session) != nil else { return }
        kinds[session] = nil
        relay.handleSessionClosed(session, now: now)
        drain()
    }

    func backpressure(_ session: SessionID) {
        relay.handleBackpressure(session, now: now)
        drain()
    }

    func ready(_ session: SessionID) {
        relay.handleReady(session, now: now)
        drain()
    }

    func durable(_ marks: [DurableMark]) {
        guard !marks.isEmpty else { return }
        for mark in marks {
            relay.handleDurable(room: mark.room, upTo: mark.roomSeq, now: now)
            bridge?.relayDurable(room: mark.room, upTo: mark.roomSeq)
        }
        drain()
    }

    /// Goodbye to every session (shutdown).
    func shutdown() {
        relay.handleShutdown(now: now)
        drain()
        timer?.close()
    }

    // MARK: outputs

    func drain() {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        // One per drain: a batch fans out to the room within one drain.
        var encoder = SharedMessageEncoder()
        var again = true
        while again {
        while let output = relay.pollOutput() {
            switch output {
            case .send(let session, let message):
                transports[session]?.deliver(message, encoder: &encoder)
            case .legacy(let session, let delivery):
                transports[session]?.deliver(legacy: delivery)
            case .append(let record):
                append(record)
                bridge?.relayAppended(record)
            case .close(let session, let reason):
                kinds[session] = nil
                transports.removeValue(forKey: session)?.relayClosed(reason)
            case .event(let event):
                note(event)
            }
        }
        again = bridge?.pumpAfterRelayDrain() ?? false
        }
        writeDueSnapshots()
        armTimer()
    }

    private func append(_ record: RelayRecord) {
        switch gate.append(record) {
        case .appended?:
            noteAppended(record.room)
        case .duplicate(let seq)?:
            metrics.errors(kind: "store_duplicate").increment()
            logger.warning("room log already holds this batch", ["room": record.room, "relay": record.roomSeq, "store": seq])
        case nil:
            break  // held for a full backlog (appended later) or failed (logged by the gate)
        }
    }

    private func noteAppended(_ room: String) {
        sinceSnapshot[room, default: 0] += 1
        if !touchedRooms.contains(room) { touchedRooms.append(room) }
        if sinceSnapshot[room] == RelayDriver.snapshotEveryBatches { dueSnapshots.append(room) }
    }

    /// The store progressed (a commit, or the housekeeping tick): append what it refused before.
    func retryHeldAppends() {
        guard gate.isHolding else { return }
        for room in gate.retryHeld() { noteAppended(room) }
        writeDueSnapshots()
    }

    /// Deletes the history of rooms idle past `--room-idle-expiry` that nobody is in (the
    /// store's `lastActivityMs`: the last batch), and forgets them.
    func expireIdleRooms() {
        let expired: [String]
        do {
            expired = try store.expireIdleRooms(nowMs: WallClock.milliseconds(), sparing: { [relay, gate] room in
                !relay.sessions(in: room).isEmpty || gate.isHolding(room: room)
            })
        } catch {
            logger.warning("idle room expiry failed", ["error": error])
            return
        }
        for room in expired {
            relay.forgetRoom(room)
            sinceSnapshot[room] = nil
            peakStrokes[room] = nil
            dueSnapshots.removeAll { $0 == room }
            gate.metrics.roomsExpired.increment()
            logger.notice("room expired: idle, its history deleted", ["room": room])
        }
    }

    /// Snapshots `room` now (its history reached the size limit: with `--retain board` the
    /// snapshot drops the batches it covers).
    private func compactNow(_ room: String) {
        guard sinceSnapshot[room, default: 0] > 0, !gate.isHolding else { return }
        if !dueSnapshots.contains(room) { dueSnapshots.append(room) }
        writeDueSnapshots()
    }

    /// Every output was acted on, so each due room's head is in the store's queue: its
    /// snapshot covers exactly what the store holds.
    private func writeDueSnapshots() {
        for room in touchedRooms {
            guard let strokes = relay.board(room)?.strokeCount else { continue }
            let peak = max(peakStrokes[room, default: 0], strokes)
            peakStrokes[room] = peak
            // Half the board gone (a clear), or half the points logged since the last snapshot
            // deleted again (clears, erases, undone strokes a new stroke made unredoable).
            let garbage = relay.garbageSinceSnapshot(room) ?? RoomGarbage()
            let shrank = strokes * 2 <= peak && peak > 0
            let wasted = garbage.discardedPoints > 0 && garbage.discardedPoints * 2 >= garbage.loggedPoints
            if shrank || wasted, sinceSnapshot[room, default: 0] >= RelayDriver.snapshotAfterShrinkBatches,
               !dueSnapshots.contains(room) {
                dueSnapshots.append(room)
            }
        }
        touchedRooms = []
        // A held record is not in the store yet: a snapshot of the relay's head would pass it.
        guard !dueSnapshots.isEmpty, !gate.isHolding else { return }
        let rooms = dueSnapshots
        dueSnapshots = []
        for room in rooms {
            sinceSnapshot[room] = 0
            peakStrokes[room] = relay.board(room)?.strokeCount ?? 0
            guard let record = relay.snapshotRecord(room: room) else { continue }
            var digest: [UInt8] = []
            for i in 0..<8 { digest.append(UInt8(truncatingIfNeeded: record.digest >> (8 * UInt64(i)))) }
            do {
                try store.writeSnapshot(room: room, RoomSnapshot(uptoRoomSeq: record.throughRoomSeq, payload: record.encode(),
                                                                 digest: digest, createdAtMs: WallClock.milliseconds()))
                logger.info("room snapshot written", ["room": room, "room_seq": record.throughRoomSeq])
            } catch {
                metrics.errors(kind: error.isDiskFull ? "disk_full" : "store_snapshot").increment()
                logger.error("room snapshot not stored", ["room": room, "error": error])
            }
        }
    }

    private func armTimer() {
        guard let timer else { return }
        if let deadline = relay.pollTimeout() {
            timer.start(atMicroseconds: deadline.microseconds) { [weak self] in
                guard let self else { return }
                self.relay.handleTimeout(now: self.now)
                self.drain()
            }
        } else {
            timer.stop()
        }
    }

    private func note(_ event: RelayEvent) {
        switch event {
        case .memberJoined(let room, let session, let user, let role):
            logger.info("member joined", ["room": room, "session": session.rawValue, "user": user, "role": role,
                                          "transport": kinds[session]?.rawValue ?? "?"])
        case .joinRefused(let session, let reason):
            metrics.refusedJoins.labels("\(reason)").increment()
            switch reason {
            case .quotaExceeded:
                break  // logged with its quota and offender (.quotaRefused)
            case .roomFull, .tooManyRooms:
                // A flood of joins into a full room (or daemon) leaves a line a minute per address.
                let address = transports[session]?.linkStatus.address ?? "?"
                let host = SocketAddress(address)?.unmappedIPv4.host ?? address
                if let unlogged = refusalLog.record("\(reason)|\(host)", now: loop.now) {
                    logger.notice("join refused", ["session": session.rawValue, "reason": "\(reason)", "address": host,
                                                   "refused_unlogged": unlogged])
                }
            default:
                logger.notice("join refused", ["session": session.rawValue, "reason": "\(reason)"])
            }
        case .quotaRefused(let session, let room, let quota, let offender):
            metrics.quotaRefusals.labels(quota.rawValue).increment()
            // Rooms it tries to create are new every time: an address is one offender for them.
            let key = quota == .roomsPerAddress ? "\(quota.rawValue)|\(offender)" : "\(quota.rawValue)|\(room)|\(offender)"
            if let unlogged = refusalLog.record(key, now: loop.now) {
                logger.warning("join refused: quota reached", ["quota": quota.rawValue, "room": room, "offender": offender,
                                                              "session": session.rawValue, "refused_unlogged": unlogged])
            }
        case .memberEvicted(let room, let session, let user, let quota):
            metrics.membersEvicted.labels(quota.rawValue).increment()
            logger.notice("idle member made way", ["room": room, "session": session.rawValue, "user": user, "for": quota.rawValue])
        case .memberTimedOut(let room, let session, let user):
            metrics.membersTimedOut.increment()
            logger.info("member timed out: nothing heard", ["room": room, "session": session.rawValue, "user": user])
        case .roomReleased(let room):
            metrics.roomsReleased.increment()
            sinceSnapshot[room] = nil
            peakStrokes[room] = nil
            logger.info("empty room released", ["room": room])
        case .memberLeft(let room, let session):
            logger.info("member left", ["room": room, "session": session.rawValue])
        case .roomCreated(let room):
            logger.info("room created", ["room": room])
            bridge?.relayRoomCreated(room)
        case .batchRefused(_, let code):
            metrics.errors(kind: "refused_batch_\(code)").increment()
        case .malformedMessage:
            metrics.errors(kind: "malformed_message").increment()
        case .syncStarted(_, let session, _, _, _):
            syncing.insert(session)
            metrics.syncsInProgress.set(syncing.count)
        case .syncCompleted(_, let session, _, _, _):
            syncing.remove(session)
            metrics.syncsInProgress.set(syncing.count)
        case .sessionClosed(let session):
            if syncing.remove(session) != nil { metrics.syncsInProgress.set(syncing.count) }
        case .memberResync(let room, let session, let cursor):
            logger.info("member resyncing", ["room": room, "session": session.rawValue, "cursor": cursor])
        case .pendingAckDropped:
            metrics.errors(kind: "pending_ack_dropped").increment()
        case .forwardConflict(let room, let origin, let originSeq):
            metrics.errors(kind: "bridge_conflicting_forward").increment()
            logger.warning("a forwarded batch reuses a number already in the log with other commands: dropped",
                           ["room": room, "origin": origin, "origin_seq": originSeq])
        case .tokenEnded(let session, let expired):
            metrics.errors(kind: expired ? "token_expired" : "token_revoked").increment()
            logger.notice(expired ? "member's token expired" : "member's token no longer verifies", ["session": session.rawValue])
        case .blobStored(let room, let hash, let bytes):
            logger.info("background image stored", ["room": room, "image": hash.hex, "bytes": bytes])
        case .blobRefused(let room, let session, let text):
            metrics.errors(kind: "refused_image").increment()
            logger.notice("image refused", ["room": room, "session": session.rawValue, "reason": text])
        case .sessionOpened, .batchAccepted, .batchDuplicate, .snapshotBuilt, .blobSent:
            break
        }
    }
}
