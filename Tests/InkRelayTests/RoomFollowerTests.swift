import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// A device built on `RoomFollower`, talking to the relay through the harness.
private struct Client {
    var session: SessionID
    var follower: RoomFollower
    let user: String
    let role: MemberRole
    var events: [RoomFollowerEvent] = []
    var nextStroke: UInt32 = 1

    init(_ session: SessionID, origin: UInt64, user: String, role: MemberRole) {
        self.session = session
        self.follower = RoomFollower(origin: origin)
        self.user = user
        self.role = role
    }

    mutating func join(_ h: Harness) {
        h.deliver(follower.join(room: "r", user: user, role: role), from: session)
        pump(h)
    }

    /// Applies the inbox and sends replies until quiet.
    mutating func pump(_ h: Harness) {
        while true {
            let got = h.take(session)
            if got.isEmpty { return }
            for m in got {
                for e in follower.handle(m) {
                    events.append(e)
                    if case .reply(let r) = e { h.deliver(r, from: session) }
                    if case .joined = e { for b in follower.resend() { h.deliver(b, from: session) } }
                }
            }
        }
    }

    mutating func draw(_ h: Harness, points: Int) {
        let id = StrokeID(nextStroke)
        nextStroke += 1
        let commands = (0..<points).map { i in
            TimedCommand(timeMs: UInt64(i), command: .point(StrokePoint(stroke: id, phase: i == points - 1 ? .end : (i == 0 ? .start : .move), x: Int32(i * 7), y: Int32(nextStroke))))
        }
        h.deliver(try! follower.submit(commands), from: session)
    }

    var synced: [Bool] { events.compactMap { if case .synced(_, let ok) = $0 { ok } else { nil } } }
}

private struct LCG {
    var state: UInt64
    mutating func next(_ bound: Int) -> Int {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((state >> 33) % UInt64(bound))
    }
}

@Test("drawing devices fold their own batches where the log put them", arguments: [1, 2, 3] as [UInt64])
func drawingDevicesEndWithTheRoomsBoard(seed: UInt64) {
    var rng = LCG(state: seed)
    var limits = RelayLimits()
    limits.maxLiveLag = 8
    let h = Harness(limits: limits)
    var clients = [
        Client(h.open(1), origin: 1, user: "t", role: .teacher),
        Client(h.open(2), origin: 2, user: "p", role: .presenter),
        Client(h.open(3), origin: 3, user: "q", role: .presenter),
        Client(h.open(4), origin: 4, user: "v", role: .viewer),
    ]
    for i in clients.indices { clients[i].join(h) }
    for step in 0..<300 {
        let i = rng.next(3)
        clients[i].draw(h, points: 1 + rng.next(6))
        if rng.next(4) == 0 { h.durable("r", UInt64(rng.next(Int(h.relay.roomHead("r")!) + 1))) }
        if rng.next(10) == 0 {
            let j = rng.next(4)
            if h.relay.isLive(clients[j].session) { h.block(clients[j].session) } else { h.ready(clients[j].session) }
        }
        let k = rng.next(4)
        clients[k].pump(h)
        _ = step
    }
    for i in clients.indices { h.ready(clients[i].session) }
    h.durable("r", h.relay.roomHead("r")!)
    for i in clients.indices { clients[i].pump(h) }
    let room = h.relay.board("r")!
    let resyncs = h.events.filter { if case .memberResync = $0 { true } else { false } }.count
    let syncs = h.events.filter { if case .syncCompleted = $0 { true } else { false } }.count
    #expect(resyncs > 0 && syncs > 0, "seed \(seed): the run must exercise resync")
    for c in clients {
        #expect(c.follower.appliedThrough == h.relay.roomHead("r"), "seed \(seed) \(c.user)")
        #expect(c.follower.board.digest == room.digest, "seed \(seed) \(c.user)")
        #expect(c.follower.pendingCount == 0)
        #expect(c.synced.allSatisfy { $0 }, "seed \(seed) \(c.user)")
    }
}

@Test func aDeviceThatLosesItsSessionResendsAndEndsExact() {
    let h = Harness()
    var t = Client(h.open(1), origin: 1, user: "t", role: .teacher)
    var p = Client(h.open(2), origin: 2, user: "p", role: .presenter)
    t.join(h)
    p.join(h)
    for _ in 0..<3 { p.draw(h, points: 4) }
    t.draw(h, points: 2)
    h.durable("r", 2)
    p.pump(h)
    t.pump(h)
    // p's session dies: batches 3 (p) and 4 (t) are not durable yet; p also drew one more
    // that never arrived.
    _ = try! p.follower.submit([TimedCommand(timeMs: 0, command: .clear)])
    h.relay.handleSessionClosed(p.session, now: h.now)
    h.drain()
    h.durable("r", 4)
    t.draw(h, points: 3)  // 5
    p.session = h.open(20)
    p.join(h)  // upTo(2): the tail after it, then the resent batches: 3 is a duplicate, the clear is new
    h.durable("r", h.relay.roomHead("r")!)
    p.pump(h)
    t.pump(h)
    #expect(h.relay.roomHead("r") == 6)
    #expect(h.appended.map(\.origin) == [2, 2, 2, 1, 1, 2])
    #expect(p.follower.pendingCount == 0)
    #expect(p.follower.board.digest == h.relay.board("r")!.digest)
    #expect(t.follower.board.digest == h.relay.board("r")!.digest)
    #expect(p.events.contains(.acknowledged(originSeq: 3, roomSeq: 3)))
}

@Test func aLateFollowerResumesItsSnapshotAndVerifiesTheDigest() {
    var limits = RelayLimits()
    limits.syncChunkBytes = 300
    limits.syncChunksInFlight = 1
    limits.snapshotCommandsPerBatch = 8
    let h = Harness(limits: limits)
    var t = Client(h.open(1), origin: 1, user: "t", role: .teacher)
    t.join(h)
    for i in 0..<40 { t.draw(h, points: 3 + i % 5) }
    var late = Client(h.open(2), origin: 2, user: "late", role: .viewer)
    h.deliver(late.follower.join(room: "r", user: "late", role: .viewer), from: late.session)
    // Apply the first chunk only, acknowledge it, then lose the session.
    for m in h.take(late.session) {
        for e in late.follower.handle(m) { late.events.append(e) }
    }
    guard case .partialSnapshot(let seq, let chunk) = late.follower.have else {
        Issue.record("expected a partial snapshot, have \(late.follower.have)")
        return
    }
    #expect(seq == 40 && chunk == 0)
    h.relay.handleSessionClosed(late.session, now: h.now)
    h.drain()
    late.session = h.open(3)
    h.deliver(late.follower.join(room: "r", user: "late", role: .viewer), from: late.session)
    let first = h.inbox[late.session]!.compactMap { if case .syncBegin(let b) = $0 { b } else { nil } }
    #expect(first.map(\.firstChunk) == [1])
    late.pump(h)
    #expect(late.synced == [true])
    #expect(late.events.filter { $0 == .boardReset }.count == 1)
    t.draw(h, points: 2)
    late.pump(h)
    #expect(late.follower.appliedThrough == 41)
    #expect(late.follower.board.digest == h.relay.board("r")!.digest)
}
