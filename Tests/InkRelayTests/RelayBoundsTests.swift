import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

@Test func roomAndMemberBoundsRefuseJoinsClearly() {
    var limits = RelayLimits()
    limits.maxRooms = 1
    limits.maxMembersPerRoom = 2
    let h = Harness(limits: limits)
    var a = Device(h.open(1), origin: 1, user: "a", role: .teacher)
    var b = Device(h.open(2), origin: 2, user: "b", role: .viewer)
    let c = Device(h.open(3), origin: 3, user: "c", role: .viewer)
    let d = Device(h.open(4), origin: 4, user: "d", role: .teacher)
    h.join(&a)
    h.join(&b)
    _ = h.take(a.session)
    h.deliver(c.join(), from: c.session)
    #expect(h.take(c.session) == [.joinRefused(.roomFull, text: "the room has 2 members")])
    h.deliver(d.join(room: "other"), from: d.session)
    #expect(h.take(d.session) == [.joinRefused(.tooManyRooms, text: "the daemon holds 1 rooms")])
    #expect(h.relay.roomNames == ["r"])
    // A refused session may try again once there is room.
    h.relay.handleSessionClosed(b.session, now: h.now)
    h.drain()
    h.deliver(c.join(), from: c.session)
    #expect(h.take(c.session).first == .joinAccepted(member: AuthorID(3), role: .viewer, roomHead: 0, syncFollows: false))
    #expect(h.take(a.session) == [
        .member(id: AuthorID(2), user: "b", role: .viewer, present: false),
        .member(id: AuthorID(3), user: "c", role: .viewer, present: true),
    ])
}

@Test func anOversizeBatchIsRefusedToItsSenderOnly() {
    var limits = RelayLimits()
    limits.maxBatchPayloadBytes = 100
    let h = Harness(limits: limits)
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    var v = Device(h.open(2), origin: 2, user: "v", role: .viewer)
    h.join(&t)
    h.join(&v)
    _ = h.take(t.session)
    h.deliver(.batch(originSeq: 1, payload: [UInt8](repeating: 7, count: 101)), from: t.session)
    #expect(h.take(t.session) == [.error(.batchTooLarge, originSeq: 1, text: "batch of 101 bytes exceeds 100")])
    #expect(h.take(v.session).isEmpty && h.appended.isEmpty)
}

@Test func malformedInputGetsAnErrorOnThatSessionOnly() {
    var limits = RelayLimits()
    limits.maxErrorsPerSession = 3
    let h = Harness(limits: limits)
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    var v = Device(h.open(2), origin: 2, user: "v", role: .viewer)
    h.join(&t)
    h.join(&v)
    _ = h.take(t.session)
    h.raw([1, 2, 3], from: v.session)
    #expect(h.take(v.session) == [.error(.malformedMessage, originSeq: 0, text: "malformed message: truncated")])
    #expect(h.take(t.session).isEmpty)
    // A well-framed batch whose payload is not a batch.
    h.deliver(.batch(originSeq: 1, payload: [0xFF]), from: t.session)
    let e = h.take(t.session)
    #expect(e.count == 1)
    if case .error(let code, let seq, _) = e.first { #expect(code == .malformedBatch && seq == 1) } else { Issue.record("\(e)") }
    #expect(h.take(v.session).isEmpty)
    // Messages before a join.
    let stranger = h.open(3)
    h.deliver(.batch(originSeq: 1, payload: [1]), from: stranger)
    #expect(h.take(stranger) == [.error(.notJoined, originSeq: 1, text: "join a room first")])
    // Past the bound of errors the session is closed; the room goes on.
    h.raw([9], from: v.session)
    h.raw([9], from: v.session)
    h.raw([9], from: v.session)
    #expect(h.closed.map(\.0) == [v.session])
    #expect(h.closed.map(\.1) == [.tooManyErrors])
    #expect(h.take(t.session) == [.member(id: AuthorID(2), user: "v", role: .viewer, present: false)])
    let (m, _) = t.stroke(points: 2)
    h.deliver(m, from: t.session)
    #expect(h.appended.count == 1)
    // Unknown kinds are skipped silently.
    h.raw([1, 30, 0], from: t.session)
    #expect(h.take(t.session).isEmpty)
}

@Test func sessionsThatNeverJoinAreClosedAtTheirDeadline() {
    let h = Harness()
    let s = h.open(1)
    #expect(h.relay.pollTimeout() == Instant.zero + RelayLimits().joinTimeout)
    h.now = Instant.milliseconds(5_000)
    h.relay.handleTimeout(now: h.now)
    h.drain()
    #expect(h.closed.isEmpty)
    h.now = Instant.milliseconds(10_000)
    h.relay.handleTimeout(now: h.now)
    h.drain()
    #expect(h.take(s) == [.goingAway(.idle, text: "no join within 10000 ms")])
    #expect(h.closed.map(\.0) == [s])
    #expect(h.relay.pollTimeout() == nil)
}

private struct TokenCheck: JoinAuthorizer {
    func authorize(_ request: JoinRequest, now: Instant) -> JoinAuthorization {
        switch request.token {
        case [1]: .verified(TokenClaims(room: "r", user: "ana", role: .teacher, expiresAtMs: 0))
        case [2]: .verified(TokenClaims(room: "r", user: "bo", role: .viewer, expiresAtMs: 0))
        case [3]: .refused(.expiredToken, text: "token expired")
        default: .refused(.badToken, text: "bad token")
        }
    }
}

@Test func tokensDecideRoomUserAndRole() {
    let h = Harness(authorizer: TokenCheck())
    func join(_ id: UInt64, user: String, role: MemberRole, token: [UInt8]) -> [ServerMessage] {
        let s = h.open(id)
        h.deliver(.join(JoinRequest(room: "r", user: user, role: role, token: token, origin: id)), from: s)
        return h.take(s)
    }
    #expect(join(1, user: "ana", role: .teacher, token: []) == [.joinRefused(.badToken, text: "bad token")])
    #expect(join(2, user: "ana", role: .teacher, token: [3]) == [.joinRefused(.expiredToken, text: "token expired")])
    #expect(join(3, user: "eve", role: .teacher, token: [1]) == [.joinRefused(.tokenMismatch, text: "the token is for another room or user")])
    #expect(join(4, user: "bo", role: .presenter, token: [2]) == [.joinRefused(.roleNotAllowed, text: "the token allows at most viewer")])
    #expect(join(5, user: "ana", role: .teacher, token: [1]).first == .joinAccepted(member: AuthorID(1), role: .teacher, roomHead: 0, syncFollows: false))
    #expect(join(6, user: "bo", role: .viewer, token: [2]).first == .joinAccepted(member: AuthorID(2), role: .viewer, roomHead: 0, syncFollows: false))
}

@Test func manyMembersEachSeeEveryOtherMembersStrokesInOneOrder() {
    let h = Harness()
    var devices: [Device] = []
    for i in 0..<12 {
        var d = Device(h.open(UInt64(i + 1)), origin: UInt64(100 + i), user: "u\(i)", role: i < 2 ? .teacher : (i < 6 ? .presenter : .viewer))
        h.join(&d)
        devices.append(d)
    }
    for round in 0..<10 {
        for i in 0..<6 {
            h.deliver(devices[i].stroke(points: 2 + (round + i) % 5, x: Int32(round)).0, from: devices[i].session)
        }
    }
    #expect(h.relay.roomHead("r") == 60)
    for i in 0..<12 {
        h.pumpSync(&devices[i])
        let own = Set(h.appended.filter { $0.origin == devices[i].origin }.map(\.roomSeq))
        #expect(devices[i].seen == (1...60).filter { !own.contains($0) }, "u\(i)")
    }
    for i in 6..<12 { #expect(devices[i].board.digest == h.relay.board("r")!.digest) }
    // A late joiner equals everyone.
    var late = Device(h.open(99), origin: 999, user: "late", role: .viewer)
    h.join(&late)
    #expect(late.board.digest == h.relay.board("r")!.digest)
}
