// The device side of the session messages: what a native client, the CLI or a legacy adapter
// keeps to follow a room exactly (docs/protocol.md sections 5a and 6).
import InkCodec

/// Why `RoomFollower.submit` refused a batch.
public enum RoomFollowerError: Error, Hashable, Sendable {
    /// `maxPendingBatches` batches await their acknowledgement.
    case tooManyPending
    /// The batch does not encode (too many commands, oversized unknown command).
    case unencodable(BinaryCodecError)
    /// Larger than `SessionMessageCodec.maxBatchPayloadBytes` once encoded.
    case tooLarge(bytes: Int)
}

/// What `RoomFollower.handle` found in a message.
public enum RoomFollowerEvent: Hashable, Sendable {
    case joined(member: AuthorID, role: MemberRole, roomHead: UInt64, syncFollows: Bool)
    case refused(JoinRefusal, text: String)
    /// A snapshot sync starts: the board was emptied.
    case boardReset
    /// A batch folded into the board, in room order: another member's (`own` false), or this
    /// device's own once its acknowledgement placed it. `roomSeq` is 0 for snapshot items.
    case applied(roomSeq: UInt64, batch: Batch, own: Bool)
    /// A sync ended and the board reached its room sequence number; `digestMatches` compares
    /// the board with the daemon's digest there.
    case synced(roomSeq: UInt64, digestMatches: Bool)
    /// The batch `originSeq` is durable at `roomSeq`.
    case acknowledged(originSeq: UInt64, roomSeq: UInt64)
    case error(SessionErrorCode, originSeq: UInt64, text: String)
    case member(id: AuthorID, user: String, role: MemberRole, present: Bool)
    case goingAway(GoingAwayReason, text: String)
    /// Send this message to the daemon (sync acknowledgements).
    case reply(ClientMessage)
    /// A payload that does not decode; the follower can no longer be exact: rejoin with
    /// `JoinHave.nothing`.
    case undecodable(roomSeq: UInt64)
    /// A background image the board names arrived whole and matches its hash.
    case blob(hash: BlobHash, bytes: [UInt8])
    /// A background image could not be had: the room has none, or it did not match its hash
    /// (asked for again up to `BlobFetcher.maxAttempts` times).
    case blobFailed(hash: BlobHash, reason: String)
    /// The daemon stored an image this device uploaded.
    case blobStored(hash: BlobHash, width: UInt32, height: UInt32)
}

/// Follows one room from the device side: folds every batch into `board` in room order (its own
/// batches at the `roomSeq` their acknowledgements name), keeps the codec states of both
/// directions, numbers and keeps its own batches until they are durable, acknowledges sync
/// chunks, and says what to ask for when it rejoins.
///
/// Call order: `join(...)` -> send; `handle(_:)` for every `ServerMessage` in order, sending each
/// `.reply`; `submit(_:)` -> send, for each batch the device draws. After a reconnect: `join`
/// again (it asks for exactly what is missing), then send `resend()` once `.joined` arrives.
public struct RoomFollower: Sendable {
    /// Own batches kept until acknowledged; `submit` refuses more.
    public static let maxPendingBatches = 4096
    /// Others' batches held while an own batch before them awaits its acknowledgement.
    public static let maxHeldBatches = 65_536

    public let origin: UInt64
    public private(set) var board = Board()
    /// Every batch up to this room sequence number is folded into `board`.
    public private(set) var appliedThrough: UInt64 = 0
    public private(set) var member: AuthorID?
    public private(set) var role: MemberRole?
    /// True between `join` and `.joined`, and while a sync runs.
    public private(set) var isSyncing = false

    private var inbound = BinaryCodecState()
    private var outbound = BinaryCodecState()
    private var nextOriginSeq: UInt64 = 1
    /// Own batches sent and not yet acknowledged, by `originSeq`, ascending.
    private var pending: [(originSeq: UInt64, batch: Batch)] = []
    /// Own batches acknowledged beyond `appliedThrough`, by `roomSeq`.
    private var placed: [UInt64: Batch] = [:]
    /// Others' batches beyond a gap (an own batch not yet acknowledged), by `roomSeq`.
    private var held: [UInt64: Batch] = [:]
    private var sync: (id: UInt32, mode: SyncMode, through: UInt64, lastChunk: UInt32?)?
    private var verify: (roomSeq: UInt64, digest: UInt64)?
    /// Fetches the background images the board names (nil: the device shows none).
    private var blobs: BlobFetcher?

    /// - Parameter blobHash: SHA-256, to fetch and check background images (docs/protocol.md
    ///   6a); without it the follower asks for none.
    public init(origin: UInt64, blobHash: (@Sendable ([UInt8]) -> [UInt8])? = nil) {
        self.origin = origin
        blobs = blobHash.map { BlobFetcher(hashBlob: $0) }
    }

    /// A background image this device has whole (fetched and checked), if it has it.
    public func blob(_ hash: BlobHash) -> [UInt8]? { blobs?.blob(hash) }

    public var pendingCount: Int { pending.count }

    /// What to ask for: nothing, the last applied `roomSeq`, or the rest of a snapshot.
    public var have: JoinHave {
        if let s = sync, s.mode == .snapshot {
            if let c = s.lastChunk { return .partialSnapshot(snapshotRoomSeq: s.through, lastChunk: c) }
            return .nothing
        }
        return appliedThrough == 0 ? .nothing : .upTo(roomSeq: appliedThrough, digest: 0)
    }

    /// The join for a new session; resets both codec states (they are per session).
    public mutating func join(room: String, user: String, role: MemberRole, token: [UInt8] = []) -> ClientMessage {
        inbound = BinaryCodecState()
        outbound = BinaryCodecState()
        held = [:]
        blobs?.sessionStarted()
        return .join(JoinRequest(room: room, user: user, role: role, token: token, origin: origin, have: have))
    }

    /// Encodes the device's own commands as its next batch.
    public mutating func submit(_ commands: [TimedCommand]) throws(RoomFollowerError) -> ClientMessage {
        guard pending.count < RoomFollower.maxPendingBatches else { throw .tooManyPending }
        let batch = Batch(author: member ?? AuthorID(0), commands: commands)
        let payload: [UInt8]
        var state = outbound
        do {
            payload = try BinaryBatchCodec.encode(batch, state: &state)
        } catch {
            throw .unencodable(error)
        }
        guard payload.count <= SessionMessageCodec.maxBatchPayloadBytes else { throw .tooLarge(bytes: payload.count) }
        outbound = state
        let seq = nextOriginSeq
        nextOriginSeq += 1
        pending.append((seq, batch))
        return .batch(originSeq: seq, payload: payload)
    }

    /// The batches not yet acknowledged, encoded again for the current session, same numbers.
    public mutating func resend() -> [ClientMessage] {
        var out: [ClientMessage] = []
        for p in pending {
            guard let payload = try? BinaryBatchCodec.encode(p.batch, state: &outbound) else { continue }
            out.append(.batch(originSeq: p.originSeq, payload: payload))
        }
        return out
    }

    public mutating func handle(_ message: ServerMessage) -> [RoomFollowerEvent] {
        var events: [RoomFollowerEvent] = []
        switch message {
        case .joinAccepted(let id, let role, let head, let follows):
            member = id
            self.role = role
            isSyncing = follows
            if !follows && appliedThrough == 0 { appliedThrough = head }
            events.append(.joined(member: id, role: role, roomHead: head, syncFollows: follows))
            if !follows { requestBlobs(&events) }
        case .joinRefused(let reason, let text):
            events.append(.refused(reason, text: text))
        case .roomBatch(let rb):
            guard let b = try? BinaryBatchCodec.decode(rb.payload, state: &inbound) else {
                events.append(.undecodable(roomSeq: rb.roomSeq))
                break
            }
            arrive(rb.roomSeq, Batch(author: rb.author, commands: b.commands), &events)
        case .batchAck(let originSeq, let roomSeq):
            acknowledge(originSeq: originSeq, roomSeq: roomSeq, &events)
        case .error(let code, let originSeq, let text):
            // A refused batch is not in the log: forget it.
            if originSeq != 0, code != .malformedMessage { pending.removeAll { $0.originSeq == originSeq } }
            events.append(.error(code, originSeq: originSeq, text: text))
        case .member(let id, let user, let role, let present):
            if id == member, present { self.role = role }
            events.append(.member(id: id, user: user, role: role, present: present))
        case .syncBegin(let begin):
            isSyncing = true
            let resumes = begin.mode == .snapshot && sync?.mode == .snapshot && sync?.through == begin.throughRoomSeq
                && begin.firstChunk > 0 && sync?.lastChunk.map { $0 + 1 == begin.firstChunk } == true
            if begin.mode == .snapshot && !resumes {
                board = Board()
                held = [:]
                placed = [:]
                appliedThrough = 0
                events.append(.boardReset)
            }
            sync = (begin.syncID, begin.mode, begin.throughRoomSeq, resumes ? begin.firstChunk - 1 : nil)
        case .syncChunk(let id, let index, let items):
            guard let s = sync, s.id == id else { break }
            for item in items {
                var fresh = BinaryCodecState()
                guard let b = try? BinaryBatchCodec.decode(item.payload, state: &fresh) else {
                    events.append(.undecodable(roomSeq: item.roomSeq))
                    continue
                }
                let batch = Batch(author: item.author, commands: b.commands)
                if s.mode == .snapshot {
                    board.apply(batch)
                    noteBackgrounds(batch)
                    events.append(.applied(roomSeq: 0, batch: batch, own: false))
                } else {
                    arrive(item.roomSeq, batch, &events)
                }
            }
            sync!.lastChunk = index
            events.append(.reply(.syncAck(syncID: id, chunk: index)))
        case .syncDone(let id, let roomSeq, let digest):
            guard let s = sync, s.id == id else { break }
            if s.mode == .snapshot { appliedThrough = roomSeq }
            sync = nil
            isSyncing = false
            // The digest is the room's at `roomSeq`; own batches still awaiting their
            // acknowledgement may keep the board below it for a moment: checked when reached.
            verify = (roomSeq, digest)
            drain(&events)
            requestBlobs(&events)  // the strokes are in: now the backgrounds
        case .goingAway(let reason, let text):
            events.append(.goingAway(reason, text: text))
        case .blobChunk(let hash, let size, let index, let count, let data):
            blobs?.handleChunk(hash: hash, size: size, index: index, count: count, data: data, &events)
        case .blobStored(let hash, let width, let height):
            events.append(.blobStored(hash: hash, width: width, height: height))
        case .blobMissing(let hash):
            blobs?.handleMissing(hash, &events)
        case .unknown:
            break
        }
        return events
    }

    /// Another member's batch at `roomSeq`: folded now if it is next, else held for the gap.
    private mutating func arrive(_ roomSeq: UInt64, _ batch: Batch, _ events: inout [RoomFollowerEvent]) {
        guard roomSeq > appliedThrough else { return }
        if held.count < RoomFollower.maxHeldBatches { held[roomSeq] = batch }
        drain(&events)
    }

    private mutating func acknowledge(originSeq: UInt64, roomSeq: UInt64, _ events: inout [RoomFollowerEvent]) {
        // Cumulative: everything of this origin up to `originSeq` is in the log.
        while let first = pending.first, first.originSeq <= originSeq {
            pending.removeFirst()
            if first.originSeq == originSeq && roomSeq > appliedThrough {
                placed[roomSeq] = Batch(author: member ?? first.batch.author, commands: first.batch.commands)
            }
        }
        events.append(.acknowledged(originSeq: originSeq, roomSeq: roomSeq))
        drain(&events)
    }

    /// Folds whatever comes next in room order.
    private mutating func drain(_ events: inout [RoomFollowerEvent]) {
        while true {
            if let v = verify, appliedThrough >= v.roomSeq {
                verify = nil
                events.append(.synced(roomSeq: v.roomSeq, digestMatches: appliedThrough == v.roomSeq && board.digest == v.digest))
            }
            let next = appliedThrough + 1
            if let b = placed.removeValue(forKey: next) {
                board.apply(b)
                noteBackgrounds(b)
                events.append(.applied(roomSeq: next, batch: b, own: true))
            } else if let b = held.removeValue(forKey: next) {
                board.apply(b)
                noteBackgrounds(b)
                events.append(.applied(roomSeq: next, batch: b, own: false))
            } else {
                return
            }
            appliedThrough = next
            if !isSyncing { requestBlobs(&events) }
        }
    }

    private mutating func noteBackgrounds(_ batch: Batch) {
        guard blobs != nil else { return }
        for timed in batch.commands {
            if case .background(let b) = timed.command, let image = b.image { blobs!.want(image.hash) }
        }
    }

    private mutating func requestBlobs(_ events: inout [RoomFollowerEvent]) {
        guard blobs != nil else { return }
        for request in blobs!.requests() { events.append(.reply(request)) }
    }
}
