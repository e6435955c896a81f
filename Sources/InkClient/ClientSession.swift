// A room member's side of the native protocol, sans IO: join, send, receive, sync, reconnect.
import InkCodec
import InkProtocol

/// One device in one room (docs/protocol.md 5a and 6), portable to any platform: it never reads
/// a clock or a socket.
///
/// ## Call order
/// ```swift
/// let s = ClientSession(configuration, transport: .datagram(connectionID: random), now: now)
/// s.handleDatagram(bytes, now:)      // UDP: every datagram from the daemon
/// s.handleStreamBytes(bytes, now:)   // TCP: every read
/// s.handleTimeout(now:)              // when pollTimeout() passes (early or twice is harmless)
/// s.handleTransportClosed(now:)      // the socket or stream ended
/// try s.send(commands, now:)         // a drawing batch; returns its originSeq
/// while let d = s.pollTransmit(now:) { socket.send(d) }   // datagrams, or stream bytes
/// while let e = s.pollEvent() { ... }
/// timer.arm(s.pollTimeout())
/// ```
/// After any input, drain `pollTransmit`, then `pollEvent`, then re-arm the timer.
///
/// ## What it keeps
/// The join is sent at creation. Own batches are numbered `originSeq` 1, 2, ... and kept until
/// a `batchAck` covers them; after `reconnect` (a new link) the session joins again saying
/// what it has and sends every unacknowledged batch again with its number, so the daemon
/// appends each once. Room batches are folded into `board` in `roomSeq` order: the daemon
/// never sends a device its own batches, so a gap before another member's batch (or up to an
/// acknowledged `roomSeq`) is filled with own accepted batches, in `originSeq` order. History
/// syncs (snapshot or tail) are applied chunk by chunk, each confirmed with `syncAck`, and
/// checked against the daemon's digest; a reconnect in the middle of a snapshot resumes after
/// the last confirmed chunk.
public final class ClientSession {
    public let configuration: ClientConfiguration

    /// The room as folded from what was received (and own accepted batches).
    public private(set) var board = Board()
    /// The last room sequence number folded into `board`.
    public private(set) var appliedRoomSeq: UInt64 = 0
    /// The member id the daemon gave this user (its author id), once joined.
    public private(set) var member: AuthorID?
    public private(set) var role: MemberRole?
    public private(set) var isJoined = false
    /// True while a history sync is being applied.
    public var isSyncing: Bool { sync != nil }
    /// The session ended for good (refused, left, gone away): nothing more is sent.
    public private(set) var hasEnded = false
    /// Own batches awaiting acknowledgement.
    public var unacknowledgedCount: Int { unacked.count }
    /// The next `originSeq` `send` will assign.
    public private(set) var nextOriginSeq: UInt64 = 1
    /// Syncs whose result did not fold to the daemon's digest.
    public private(set) var digestMismatches = 0
    /// ARQ statistics of the current link (UDP only).
    public var linkStats: ARQStats? { link.arqStats }

    private var link: ClientLink
    private var have: JoinHave
    private var outbound = BinaryCodecState()
    private var inbound = BinaryCodecState()
    /// Own batches not yet acknowledged, in originSeq order.
    private var unacked = Fifo<(originSeq: UInt64, batch: Batch)>()
    /// How many of `unacked` (from the first) the current link has been given.
    private var sentCount = 0
    /// Own batches (not refused) not yet placed in the board, in originSeq order.
    private var unplaced = Fifo<(originSeq: UInt64, batch: Batch)>()
    private var sync: SyncState?
    /// The snapshot sync in progress when the link was lost, for `have` on the next join.
    private var partialSnapshot: (throughRoomSeq: UInt64, lastChunk: UInt32)?
    private var events: [ClientEvent] = []
    private var eventStart = 0

    private struct SyncState {
        var begin: SyncBegin
        var lastApplied: UInt32?
    }

    public init(_ configuration: ClientConfiguration, transport: ClientTransport, now: Instant) {
        self.configuration = configuration
        have = configuration.initialHave
        link = ClientLink(transport, configuration: configuration.arq, now: now)
        sendJoin()
    }

    // MARK: inputs

    public func handleDatagram(_ bytes: [UInt8], now: Instant) {
        link.handleDatagram(bytes, now: now)
        process(now: now)
    }

    public func handleStreamBytes(_ bytes: [UInt8], now: Instant) {
        link.handleStreamBytes(bytes)
        process(now: now)
    }

    public func handleTimeout(now: Instant) {
        link.handleTimeout(now: now)
        process(now: now)
    }

    /// The socket or stream is gone (read end, error). Reported once as `.disconnected`.
    public func handleTransportClosed(now: Instant) {
        link.close(reason: "transport closed")
        process(now: now)
    }

    /// Queues a drawing batch (its author is this member; times are the author's). Returns its
    /// `originSeq`. Batches queued before the join completes go out once it does.
    @discardableResult
    public func send(_ commands: [TimedCommand], now: Instant) throws(ClientError) -> UInt64 {
        guard !hasEnded else { throw .ended }
        guard unacked.count < ClientConfiguration.maxPendingBatches else { throw .tooManyPending }
        guard commands.count <= Batch.maxCommands else { throw .unencodable("more than \(Batch.maxCommands) commands") }
        let batch = Batch(author: member ?? AuthorID(0), commands: commands)
        // Check encodability now, on a scratch state, so a bad batch never reaches the link.
        var scratch = BinaryCodecState()
        do { _ = try BinaryBatchCodec.encode(batch, state: &scratch, selfContained: true) } catch {
            throw .unencodable("\(error)")
        }
        let seq = nextOriginSeq
        nextOriginSeq += 1
        unacked.append((seq, batch))
        unplaced.append((seq, batch))
        flushBatches()
        process(now: now)
        return seq
    }

    public func grantDraw(user: String) { _ = link.send(SessionMessageCodec.encode(.grantDraw(user: user))) }
    public func revokeDraw(user: String) { _ = link.send(SessionMessageCodec.encode(.revokeDraw(user: user))) }

    /// Leaves the room; the daemon answers `goingAway(.left)`.
    public func leave() { _ = link.send(SessionMessageCodec.encode(.leave)) }

    /// Replaces the link (a new UDP connection id or a new TCP stream) and joins again with
    /// what the board has; unacknowledged batches are sent again after the join.
    public func reconnect(_ transport: ClientTransport, now: Instant) {
        guard !hasEnded else { return }
        if !link.isClosed { link.close(reason: "reconnecting") }
        link = ClientLink(transport, configuration: configuration.arq, now: now)
        if let s = sync, s.begin.mode == .snapshot {
            if let last = s.lastApplied {
                partialSnapshot = (s.begin.throughRoomSeq, last)
                have = .partialSnapshot(snapshotRoomSeq: s.begin.throughRoomSeq, lastChunk: last)
            } else {
                partialSnapshot = nil
                have = .nothing
            }
        } else if isJoined || appliedRoomSeq > 0 {
            have = .upTo(roomSeq: appliedRoomSeq, digest: board.digest)
        }
        sync = nil
        isJoined = false
        outbound = BinaryCodecState()
        inbound = BinaryCodecState()
        sentCount = 0
        sendJoin()
    }

    // MARK: outputs

    public func pollTransmit(now: Instant) -> [UInt8]? { link.pollTransmit(now: now) }

    public func pollEvent() -> ClientEvent? {
        guard eventStart < events.count else { return nil }
        let e = events[eventStart]
        eventStart += 1
        if eventStart == events.count {
            events.removeAll(keepingCapacity: true)
            eventStart = 0
        }
        return e
    }

    public func pollTimeout() -> Instant? { link.pollTimeout() }

    /// True when the link has nothing unacknowledged or queued (a UDP goodbye got through).
    public var isLinkIdle: Bool { link.isIdle }

    // MARK: processing

    private func sendJoin() {
        let request = JoinRequest(room: configuration.room, user: configuration.user, role: configuration.role,
                                  token: configuration.token, origin: configuration.origin, have: have)
        _ = link.send(SessionMessageCodec.encode(.join(request)))
    }

    /// Hands the link every unsent own batch it takes, in order (only once joined).
    private func flushBatches() {
        guard isJoined else { return }
        while sentCount < unacked.count {
            let (originSeq, batch) = unacked[sentCount]
            // Encode on a copy: if the link refuses (queue full), the state must not advance.
            var trial = outbound
            guard let payload = try? BinaryBatchCodec.encode(batch, state: &trial) else {
                sentCount += 1 // checked encodable in `send`; never happens
                continue
            }
            guard link.send(SessionMessageCodec.encode(.batch(originSeq: originSeq, payload: payload))) else { return }
            outbound = trial
            sentCount += 1
        }
    }

    private func emit(_ e: ClientEvent) { events.append(e) }

    private func process(now: Instant) {
        while let signal = link.pollSignal() {
            switch signal {
            case .message(let bytes):
                do {
                    handle(try SessionMessageCodec.decodeServer(bytes))
                } catch {
                    emit(.protocolError("undecodable message: \(error)"))
                }
            case .unreachable: emit(.unreachable)
            case .reachable: emit(.reachable)
            case .closed(let reason):
                emit(.disconnected(reason: reason))
            }
        }
        flushBatches()
    }

    private func handle(_ message: ServerMessage) {
        switch message {
        case .joinAccepted(let id, let role, let head, let syncFollows):
            member = id
            self.role = role
            isJoined = true
            emit(.joined(member: id, role: role, roomHead: head, syncFollows: syncFollows))
            flushBatches()
        case .joinRefused(let reason, let text):
            hasEnded = true
            emit(.refused(reason, text: text))
        case .roomBatch(let b):
            guard let batch = try? BinaryBatchCodec.decode(b.payload, state: &inbound) else {
                emit(.protocolError("undecodable room batch \(b.roomSeq)"))
                return
            }
            applyLogged(DeliveredBatch(roomSeq: b.roomSeq, author: b.author, acceptedAtMs: b.timeMs, commands: batch.commands, fromSync: false))
        case .batchAck(let originSeq, let roomSeq):
            let done = unacked.prefixCount { $0.originSeq <= originSeq }
            unacked.removeFirst(done)
            sentCount = max(0, sentCount - done)
            if sync == nil { placeOwn(upToOriginSeq: originSeq, at: roomSeq) }
            emit(.acknowledged(originSeq: originSeq, roomSeq: roomSeq))
        case .error(let code, let originSeq, let text):
            if originSeq > 0 {
                if let i = unacked.firstIndex(where: { $0.originSeq == originSeq }) {
                    unacked.remove(at: i)
                    if i < sentCount { sentCount -= 1 }
                }
                if let i = unplaced.firstIndex(where: { $0.originSeq == originSeq }) { unplaced.remove(at: i) }
            }
            emit(.error(code, originSeq: originSeq, text: text))
        case .member(let id, let user, let role, let present):
            if user == configuration.user { self.role = role }
            emit(.member(id: id, user: user, role: role, present: present))
        case .syncBegin(let begin):
            handleSyncBegin(begin)
        case .syncChunk(let id, let index, let items):
            handleSyncChunk(id: id, index: index, items: items)
        case .syncDone(let id, let roomSeq, let digest):
            guard let s = sync, s.begin.syncID == id else { return }
            if s.begin.mode == .tail { placeOwn(through: roomSeq, exact: false) }
            appliedRoomSeq = max(appliedRoomSeq, roomSeq)
            sync = nil
            partialSnapshot = nil
            let matches = board.digest == digest
            if !matches { digestMismatches += 1 }
            emit(.syncDone(roomSeq: roomSeq, digest: digest, matches: matches))
        case .goingAway(let reason, let text):
            // `.replaced`: this device joined again on a newer link, which goes on.
            if reason != .replaced { hasEnded = true }
            emit(.goingAway(reason, text: text))
        case .unknown:
            break
        }
    }

    private func handleSyncBegin(_ begin: SyncBegin) {
        switch begin.mode {
        case .snapshot:
            let resumes = begin.firstChunk > 0 && partialSnapshot?.throughRoomSeq == begin.throughRoomSeq
            if !resumes {
                board = Board()
                // Own batches the snapshot covers can no longer be told apart; those still
                // unplaced are assumed to follow it (they fill gaps after it).
            }
            appliedRoomSeq = 0
            sync = SyncState(begin: begin, lastApplied: begin.firstChunk > 0 ? begin.firstChunk - 1 : nil)
        case .tail:
            if begin.afterRoomSeq > appliedRoomSeq { placeOwn(through: begin.afterRoomSeq, exact: false) }
            sync = SyncState(begin: begin, lastApplied: nil)
        }
        emit(.syncStarted(begin))
    }

    private func handleSyncChunk(id: UInt32, index: UInt32, items: [SyncItem]) {
        guard var s = sync, s.begin.syncID == id else { return }
        for item in items {
            var fresh = BinaryCodecState()
            guard let batch = try? BinaryBatchCodec.decode(item.payload, state: &fresh) else {
                emit(.protocolError("undecodable sync item in chunk \(index)"))
                continue
            }
            let delivered = DeliveredBatch(roomSeq: item.roomSeq, author: item.author, acceptedAtMs: item.timeMs,
                                           commands: batch.commands, fromSync: true)
            if s.begin.mode == .snapshot {
                board.apply(Batch(author: item.author, commands: batch.commands))
                emit(.delivered(delivered))
            } else {
                applyLogged(delivered)
            }
        }
        s.lastApplied = index
        sync = s
        _ = link.send(SessionMessageCodec.encode(.syncAck(syncID: id, chunk: index)))
        emit(.syncProgress(syncID: id, chunk: index, items: items.count))
    }

    /// Folds another member's batch at its room sequence number, own batches first for the gap.
    private func applyLogged(_ b: DeliveredBatch) {
        if b.roomSeq <= appliedRoomSeq && b.roomSeq != 0 { return }
        if b.roomSeq > appliedRoomSeq + 1 { placeOwn(through: b.roomSeq - 1, exact: false) }
        board.apply(Batch(author: b.author, commands: b.commands))
        if b.roomSeq > 0 { appliedRoomSeq = b.roomSeq }
        emit(.delivered(b))
    }

    /// Fills `appliedRoomSeq + 1 ... roomSeq` with own unplaced batches (the daemon sent this
    /// device everything else of that range). With `exact`, only when the counts agree.
    private func placeOwn(through roomSeq: UInt64, exact: Bool) {
        guard roomSeq > appliedRoomSeq else { return }
        let gap = Int(min(roomSeq - appliedRoomSeq, UInt64(Int.max)))
        if exact && gap > unplaced.count { return }
        let n = min(gap, unplaced.count)
        for i in 0..<n { board.apply(Batch(author: member ?? unplaced[i].batch.author, commands: unplaced[i].batch.commands)) }
        unplaced.removeFirst(n)
        appliedRoomSeq = roomSeq
    }

    /// An acknowledgement says own batches up to `originSeq` are in the log, the last at
    /// `roomSeq`: when exactly that many room sequence numbers are unapplied, they are ours.
    private func placeOwn(upToOriginSeq originSeq: UInt64, at roomSeq: UInt64) {
        let mine = unplaced.prefixCount { $0.originSeq <= originSeq }
        guard roomSeq > appliedRoomSeq, roomSeq - appliedRoomSeq == UInt64(mine) else { return }
        placeOwn(through: roomSeq, exact: true)
    }
}
