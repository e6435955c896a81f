// A room member's side of the native protocol, sans IO: join, send, receive, sync, reconnect.
import InkCodec
import InkProtocol

/// One device in one room (docs/protocol.md 5a and 6), portable to any platform: it never reads
/// a clock or a socket.
///
/// ## Call order
/// ```swift
/// let s = ClientSession(configuration, transport: .datagram(connectionID: random), crypto: crypto, now: now)
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
/// The room itself is followed by InkProtocol's `RoomFollower` (one implementation for every
/// device): own batches numbered `originSeq` 1, 2, ... and kept until acknowledged, the board
/// folded in `roomSeq` order with own batches at the `roomSeq` their acks name, sync chunks
/// applied and confirmed, the digest checked, and `have` for a rejoin. This class adds the link
/// (a sealed session, docs/protocol.md 4: the join rides in its handshake; ARQ over UDP or
/// framed TCP), the join at creation and after `reconnect` (then every
/// unacknowledged batch again, same numbers, so the daemon appends each once; a snapshot sync
/// resumes after the last confirmed chunk), held messages while the link's queue is full, and
/// one event stream.
public final class ClientSession {
    public let configuration: ClientConfiguration

    /// The room as folded from what was received (and own acknowledged batches).
    public var board: Board { follower.board }
    /// The last room sequence number folded into `board`.
    public var appliedRoomSeq: UInt64 { follower.appliedThrough }
    /// The member id the daemon gave this user (its author id), once joined.
    public var member: AuthorID? { follower.member }
    public var role: MemberRole? { follower.role }
    public private(set) var isJoined = false
    /// True from the join until the first sync (if any) is applied, and during later syncs.
    public var isSyncing: Bool { follower.isSyncing }
    /// The session ended for good (refused, left, gone away): nothing more is sent.
    public private(set) var hasEnded = false
    /// Own batches awaiting acknowledgement.
    public var unacknowledgedCount: Int { follower.pendingCount + deferred.count }
    /// Syncs whose result did not fold to the daemon's digest.
    public private(set) var digestMismatches = 0
    /// ARQ statistics of the current link (UDP only).
    public var linkStats: ARQStats? { link.arqStats }
    /// What the current link's sealing refused (UDP only).
    public var sealedStats: SealedStats? { link.sealedStats }
    /// The daemon's static key: pinned, or learned from the daemon on first use.
    public private(set) var serverKey: [UInt8]?

    private var follower: RoomFollower
    private var link: ClientLink!
    private let crypto: any SessionCrypto
    /// Encoded messages the link refused (queue full), sent first, in order.
    private var held = Fifo<[UInt8]>()
    /// After a reconnect, unacknowledged batches go again once the join is accepted.
    private var resendOnJoin = false
    /// Batches drawn while a rejoin is pending: submitted after the resend, so the daemon sees
    /// every `originSeq` in order (it drops a number at or below the last it appended).
    private var deferred = Fifo<[TimedCommand]>()
    /// The last `originSeq` given out by `send`.
    private var lastOriginSeq: UInt64 = 0
    private var lastSyncDigest: UInt64 = 0
    private var events: [ClientEvent] = []
    private var eventStart = 0
    /// The latest `now` an input brought (messages sent from calls without one are stamped so).
    private var clock = Instant.zero
    /// When this device last sent a message: a `ping` follows `configuration.keepalive` after.
    private var lastSentAt = Instant.zero

    /// `crypto` supplies the primitives of the sealed session (OpenSSL's in `inkwire`).
    public init(_ configuration: ClientConfiguration, transport: ClientTransport, crypto: any SessionCrypto, now: Instant) {
        self.configuration = configuration
        self.crypto = crypto
        serverKey = configuration.serverKey
        follower = RoomFollower(origin: configuration.origin, blobHash: configuration.blobHash)
        clock = now
        lastSentAt = now
        link = makeLink(transport, now: now)
    }

    // MARK: inputs

    public func handleDatagram(_ bytes: [UInt8], now: Instant) {
        clock = now
        link.handleDatagram(bytes, now: now)
        process()
    }

    public func handleStreamBytes(_ bytes: [UInt8], now: Instant) {
        clock = now
        link.handleStreamBytes(bytes, now: now)
        process()
    }

    public func handleTimeout(now: Instant) {
        clock = now
        link.handleTimeout(now: now)
        // A member that only watches still says it is there (the daemon closes silent ones).
        if let due = keepaliveDue, now >= due { transmit(.ping) }
        process()
    }

    /// The socket or stream is gone (read end, error). Reported once as `.disconnected`.
    public func handleTransportClosed(now: Instant) {
        link.close(reason: "transport closed")
        process()
    }

    /// Queues a drawing batch (its author is this member; times are the author's). Returns its
    /// `originSeq`. Batches queued before the join completes go out right after the join.
    @discardableResult
    public func send(_ commands: [TimedCommand], now: Instant) throws(ClientError) -> UInt64 {
        clock = now
        guard !hasEnded else { throw .ended }
        guard held.count < ClientConfiguration.maxHeldMessages else { throw .tooManyPending }
        if resendOnJoin {
            guard unacknowledgedCount < ClientConfiguration.maxPendingBatches else { throw .tooManyPending }
            guard commands.count <= Batch.maxCommands else { throw .unencodable("more than \(Batch.maxCommands) commands") }
            deferred.append(commands)
            lastOriginSeq += 1
            return lastOriginSeq
        }
        let message: ClientMessage
        do {
            message = try follower.submit(commands)
        } catch .tooManyPending {
            throw .tooManyPending
        } catch {
            throw .unencodable("\(error)")
        }
        guard case .batch(let originSeq, _) = message else { return 0 }
        lastOriginSeq = originSeq
        transmit(message)
        process()
        return originSeq
    }

    /// Uploads an image (its SHA-256 is `hash`) in `uploadPartBytes` parts; `.imageStored`
    /// or an `.error(blobRefused, ...)` answers. Send it again after a reconnect.
    public func uploadImage(_ bytes: [UInt8], hash: BlobHash) {
        guard !hasEnded, !bytes.isEmpty, bytes.count <= Int(SessionMessageCodec.maxBlobBytes) else { return }
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + ClientConfiguration.uploadPartBytes)
            transmit(.blobPut(hash: hash, size: UInt32(bytes.count), offset: UInt32(offset), data: Array(bytes[offset..<end])))
            offset = end
        }
        process()
    }

    /// A background image this device has whole, if it has it.
    public func background(_ hash: BlobHash) -> [UInt8]? { follower.blob(hash) }

    public func grantDraw(user: String) { transmit(.grantDraw(user: user)) }
    public func revokeDraw(user: String) { transmit(.revokeDraw(user: user)) }

    /// Leaves the room; the daemon answers `goingAway(.left)`.
    public func leave() { transmit(.leave) }

    /// Replaces the link (a new UDP connection id or a new TCP stream) and joins again with
    /// what the board has; unacknowledged batches are sent again once the join is accepted.
    public func reconnect(_ transport: ClientTransport, now: Instant) {
        guard !hasEnded else { return }
        clock = now
        lastSentAt = now
        if !link.isClosed { link.close(reason: "reconnecting") }
        held = Fifo()
        isJoined = false
        resendOnJoin = true
        link = makeLink(transport, now: now)
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

    public func pollTimeout() -> Instant? {
        guard let due = keepaliveDue else { return link.pollTimeout() }
        guard let linkDue = link.pollTimeout() else { return due }
        return min(due, linkDue)
    }

    /// When the next `ping` is due: joined, and nothing sent for `configuration.keepalive`.
    private var keepaliveDue: Instant? {
        guard isJoined, !hasEnded, !link.isClosed else { return nil }
        return lastSentAt + configuration.keepalive
    }

    /// True when the link has nothing unacknowledged or queued (a UDP goodbye got through).
    public var isLinkIdle: Bool { link.isIdle && held.isEmpty }

    // MARK: processing

    /// A new link whose handshake carries the join (with what the board has).
    private func makeLink(_ transport: ClientTransport, now: Instant) -> ClientLink {
        var message = follower.join(room: configuration.room, user: configuration.user, role: configuration.role,
                                    token: configuration.token)
        // A device with nothing asks as configured (e.g. for the whole log as a tail).
        if case .join(var request) = message, request.have == .nothing {
            request.have = configuration.initialHave
            message = .join(request)
        }
        return ClientLink(transport, join: SessionMessageCodec.encode(message), serverKey: serverKey, crypto: crypto,
                          configuration: configuration.arq, sealing: configuration.sealing, now: now)
    }

    /// Hands the link one message, after any it refused before (order is kept).
    private func transmit(_ message: ClientMessage) {
        lastSentAt = clock
        let bytes = SessionMessageCodec.encode(message)
        flushHeld()
        if !held.isEmpty || !link.send(bytes) { held.append(bytes) }
    }

    private func flushHeld() {
        var n = 0
        while n < held.count && link.send(held[n]) { n += 1 }
        held.removeFirst(n)
    }

    private func emit(_ e: ClientEvent) { events.append(e) }

    private func process() {
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
            case .closed(let reason): emit(.disconnected(reason: reason))
            case .established: emit(.established)
            case .reset: emit(.sessionReset)
            case .notice(let code, let key):
                emit(code == .keyMismatch ? .serverKeyMismatch(pinned: serverKey ?? [], presented: key) : .serverBusy)
            case .learnedKey(let key):
                serverKey = key
                emit(.serverKeyLearned(key))
            }
        }
        flushHeld()
    }

    private func handle(_ message: ServerMessage) {
        switch message {
        case .syncBegin(let begin):
            emit(.syncStarted(begin))
        case .syncDone(_, _, let digest):
            lastSyncDigest = digest
        default:
            break
        }
        let results = follower.handle(message)
        if case .syncChunk(let id, let index, let items) = message, results.contains(.reply(.syncAck(syncID: id, chunk: index))) {
            emit(.syncProgress(syncID: id, chunk: index, items: items.count))
        }
        for r in results { apply(r, syncing: isSyncMessage(message)) }
    }

    private func isSyncMessage(_ m: ServerMessage) -> Bool {
        switch m {
        case .syncChunk, .syncDone: true
        default: false
        }
    }

    private func apply(_ r: RoomFollowerEvent, syncing: Bool) {
        switch r {
        case .joined(let id, let role, let head, let follows):
            isJoined = true
            lastSentAt = clock
            emit(.joined(member: id, role: role, roomHead: head, syncFollows: follows))
            if resendOnJoin {
                resendOnJoin = false
                for m in follower.resend() { transmit(m) }
                while !deferred.isEmpty {
                    let commands = deferred[0]
                    deferred.removeFirst(1)
                    // Checked when deferred; a batch that no longer encodes is dropped.
                    if let m = try? follower.submit(commands) { transmit(m) }
                }
            }
        case .refused(let reason, let text):
            hasEnded = true
            emit(.refused(reason, text: text))
        case .boardReset:
            break
        case .applied(let roomSeq, let batch, let own):
            if !own { emit(.delivered(DeliveredBatch(roomSeq: roomSeq, author: batch.author, commands: batch.commands, fromSync: syncing))) }
        case .synced(let roomSeq, let matches):
            if !matches { digestMismatches += 1 }
            emit(.syncDone(roomSeq: roomSeq, digest: lastSyncDigest, matches: matches))
        case .acknowledged(let originSeq, let roomSeq):
            emit(.acknowledged(originSeq: originSeq, roomSeq: roomSeq))
        case .error(let code, let originSeq, let text):
            emit(.error(code, originSeq: originSeq, text: text))
        case .member(let id, let user, let role, let present):
            emit(.member(id: id, user: user, role: role, present: present))
        case .goingAway(let reason, let text):
            // `.replaced`: this device joined again on a newer link, which goes on.
            // `.shuttingDown`: the daemon may come back; `reconnect` rejoins then.
            if reason != .replaced && reason != .shuttingDown { hasEnded = true }
            emit(.goingAway(reason, text: text))
        case .reply(let m):
            transmit(m)
        case .undecodable(let roomSeq):
            emit(.protocolError("undecodable batch at roomSeq \(roomSeq)"))
        case .blob(let hash, let bytes):
            emit(.background(hash: hash, bytes: bytes))
        case .blobFailed(let hash, let reason):
            emit(.backgroundFailed(hash: hash, reason: reason))
        case .blobStored(let hash, let width, let height):
            emit(.imageStored(hash: hash, width: width, height: height))
        }
    }
}
