import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// Many simulated devices around one relay, in one process, no IO. Every message goes through
/// the session message codec both ways, as it would on a wire.
final class Harness {
    let relay: Relay
    var now = Instant.zero
    /// Messages each session received, in order, not yet taken.
    var inbox: [SessionID: [ServerMessage]] = [:]
    var appended: [RelayRecord] = []
    var closed: [(SessionID, GoingAwayReason)] = []
    var events: [RelayEvent] = []
    /// What each legacy session was handed, in order.
    var legacy: [SessionID: [LegacyDelivery]] = [:]

    init(limits: RelayLimits = RelayLimits(), authorizer: any JoinAuthorizer = OpenAuthorizer()) {
        relay = Relay(configuration: RelayConfiguration(limits: limits, wallClockAtZeroMs: 1_000_000), authorizer: authorizer)
    }

    func drain() {
        while let o = relay.pollOutput() {
            switch o {
            case .send(let s, let m):
                let wire = SessionMessageCodec.encode(m)
                let back = try! SessionMessageCodec.decodeServer(wire)
                #expect(back == m)
                inbox[s, default: []].append(back)
            case .append(let r): appended.append(r)
            case .close(let s, let reason): closed.append((s, reason))
            case .event(let e): events.append(e)
            case .legacy(let s, let d): legacy[s, default: []].append(d)
            }
        }
    }

    func open(_ id: UInt64, _ transport: TransportKind = .udp, source: SourceHost? = nil) -> SessionID {
        let s = SessionID(id)
        relay.handleSessionOpened(s, transport: transport, source: source, now: now)
        drain()
        return s
    }

    func deliver(_ message: ClientMessage, from s: SessionID) {
        relay.handleMessage(SessionMessageCodec.encode(message), from: s, now: now)
        drain()
    }

    func raw(_ bytes: [UInt8], from s: SessionID) {
        relay.handleMessage(bytes, from: s, now: now)
        drain()
    }

    /// Takes what `s` received so far.
    func take(_ s: SessionID) -> [ServerMessage] {
        defer { inbox[s] = [] }
        return inbox[s] ?? []
    }

    func durable(_ room: String, _ upTo: UInt64) {
        relay.handleDurable(room: room, upTo: upTo, now: now)
        drain()
    }

    func block(_ s: SessionID) {
        relay.handleBackpressure(s, now: now)
        drain()
    }

    func ready(_ s: SessionID) {
        relay.handleReady(s, now: now)
        drain()
    }
}

/// A device: encodes its batches against its own codec state, decodes what it receives, folds
/// the room's board from it, and checks every room sequence number comes once and in order.
struct Device {
    let session: SessionID
    let origin: UInt64
    let user: String
    var role: MemberRole
    var author: AuthorID?
    var out = BinaryCodecState()
    var inbound = BinaryCodecState()
    var nextOriginSeq: UInt64 = 1
    var nextStroke: UInt32 = 1
    /// The board from what the relay sent (others' batches and syncs).
    var board = Board()
    /// Room sequence numbers applied, in order.
    var seen: [UInt64] = []
    var lastDigest: UInt64?
    var syncChunks: [UInt32] = []
    var currentSync: UInt32?

    init(_ session: SessionID, origin: UInt64, user: String, role: MemberRole) {
        self.session = session
        self.origin = origin
        self.user = user
        self.role = role
    }

    func join(room: String = "r", have: JoinHave = .nothing, token: [UInt8] = []) -> ClientMessage {
        .join(JoinRequest(room: room, user: user, role: role, token: token, origin: origin, have: have))
    }

    /// A batch of one stroke of `points` points.
    mutating func stroke(points: Int, x: Int32 = 0) -> (ClientMessage, [TimedCommand]) {
        let id = StrokeID(nextStroke)
        nextStroke += 1
        var commands: [TimedCommand] = []
        for i in 0..<points {
            let phase: StrokePhase = i == 0 ? .start : (i == points - 1 ? .end : .move)
            commands.append(TimedCommand(timeMs: UInt64(i) * 16, command: .point(StrokePoint(stroke: id, phase: phase, x: x + Int32(i), y: Int32(i) * 3))))
        }
        return (batch(commands), commands)
    }

    mutating func batch(_ commands: [TimedCommand], originSeq: UInt64? = nil) -> ClientMessage {
        let payload = try! BinaryBatchCodec.encode(Batch(author: author ?? AuthorID(0), commands: commands), state: &out)
        let seq = originSeq ?? nextOriginSeq
        if originSeq == nil { nextOriginSeq += 1 }
        return .batch(originSeq: seq, payload: payload)
    }

    mutating func commands(_ list: [Command]) -> ClientMessage {
        batch(list.map { TimedCommand(timeMs: 0, command: $0) })
    }

    /// Applies received messages; returns the sync acks a well-behaved device would send.
    mutating func apply(_ messages: [ServerMessage]) -> [ClientMessage] {
        var acks: [ClientMessage] = []
        for m in messages {
            switch m {
            case .joinAccepted(let member, let role, _, _):
                author = member
                self.role = role
            case .roomBatch(let rb):
                let b = try! BinaryBatchCodec.decode(rb.payload, state: &inbound)
                board.apply(Batch(author: rb.author, commands: b.commands))
                seen.append(rb.roomSeq)
            case .syncBegin(let begin):
                currentSync = begin.syncID
                if begin.mode == .snapshot && begin.firstChunk == 0 { board = Board() }
            case .syncChunk(let id, let index, let items):
                #expect(id == currentSync)
                syncChunks.append(index)
                for item in items {
                    var fresh = BinaryCodecState()
                    let b = try! BinaryBatchCodec.decode(item.payload, state: &fresh)
                    board.apply(Batch(author: item.author, commands: b.commands))
                    if item.roomSeq != 0 { seen.append(item.roomSeq) }
                }
                acks.append(.syncAck(syncID: id, chunk: index))
            case .syncDone(_, _, let digest):
                lastDigest = digest
                #expect(board.digest == digest, "board after sync differs from the relay's digest")
                currentSync = nil
            default: break
            }
        }
        return acks
    }
}

extension Harness {
    /// Joins `device` and applies what it gets (syncs acknowledged until done).
    func join(_ device: inout Device, room: String = "r", have: JoinHave = .nothing) {
        deliver(device.join(room: room, have: have), from: device.session)
        pumpSync(&device)
    }

    /// Lets `device` apply its inbox and acknowledge chunks until nothing more comes.
    func pumpSync(_ device: inout Device) {
        while true {
            let got = take(device.session)
            if got.isEmpty { return }
            for ack in device.apply(got) { deliver(ack, from: device.session) }
        }
    }
}

func roomBatches(_ messages: [ServerMessage]) -> [RoomBatch] {
    messages.compactMap { if case .roomBatch(let rb) = $0 { rb } else { nil } }
}

func decodeAll(_ batches: [RoomBatch]) -> [[TimedCommand]] {
    var state = BinaryCodecState()
    return batches.map { try! BinaryBatchCodec.decode($0.payload, state: &state).commands }
}
