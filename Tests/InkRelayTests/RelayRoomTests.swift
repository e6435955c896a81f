import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// Teacher t (origin 11), presenter p (12), viewers v1 (13) and v2 (14), joined in that order.
private func classroom(_ h: Harness) -> (Device, Device, Device, Device) {
    var t = Device(h.open(1), origin: 11, user: "teacher", role: .teacher)
    var p = Device(h.open(2), origin: 12, user: "pia", role: .presenter)
    var v1 = Device(h.open(3), origin: 13, user: "vic", role: .viewer)
    var v2 = Device(h.open(4), origin: 14, user: "val", role: .viewer)
    h.join(&t)
    h.join(&p)
    h.join(&v1)
    h.join(&v2)
    for d in [t, p, v1, v2] { _ = h.take(d.session) }
    h.events = []
    return (t, p, v1, v2)
}

@Test func joinAnnouncesMembersAndAssignsAuthors() {
    let h = Harness()
    var t = Device(h.open(1), origin: 11, user: "teacher", role: .teacher)
    h.deliver(t.join(), from: t.session)
    #expect(h.take(t.session) == [.joinAccepted(member: AuthorID(1), role: .teacher, roomHead: 0, syncFollows: false)])
    var v = Device(h.open(2), origin: 12, user: "vic", role: .viewer)
    h.deliver(v.join(), from: v.session)
    #expect(h.take(v.session) == [
        .joinAccepted(member: AuthorID(2), role: .viewer, roomHead: 0, syncFollows: false),
        .member(id: AuthorID(1), user: "teacher", role: .teacher, present: true),
    ])
    #expect(h.take(t.session) == [.member(id: AuthorID(2), user: "vic", role: .viewer, present: true)])
    _ = t.apply([])
    v.role = .viewer
}

@Test func batchesFanOutToEveryOtherMemberInRoomOrder() {
    let h = Harness()
    var (t, p, v1, v2) = classroom(h)
    t.author = AuthorID(1)
    p.author = AuthorID(2)
    let (m1, c1) = t.stroke(points: 5)
    let (m2, c2) = t.stroke(points: 3, x: 100)
    let (m3, c3) = p.stroke(points: 4, x: 50)
    let (m4, c4) = t.stroke(points: 2, x: 7)
    h.deliver(m1, from: t.session)
    h.deliver(m2, from: t.session)
    h.deliver(m3, from: p.session)
    h.deliver(m4, from: t.session)

    #expect(h.appended.map(\.roomSeq) == [1, 2, 3, 4])
    #expect(h.appended.map(\.author) == [AuthorID(1), AuthorID(1), AuthorID(2), AuthorID(1)])
    #expect(h.appended.map(\.originSeq) == [1, 2, 1, 3])
    #expect(h.appended.map(\.origin) == [11, 11, 12, 11])
    #expect(h.appended.allSatisfy { $0.timeMs == 1_000_000 && $0.room == "r" })
    // Records are self-contained.
    for (r, c) in zip(h.appended, [c1, c2, c3, c4]) {
        var fresh = BinaryCodecState()
        #expect(try! BinaryBatchCodec.decode(r.payload, state: &fresh).commands == c)
    }
    for v in [v1, v2] {
        let got = roomBatches(h.take(v.session))
        #expect(got.map(\.roomSeq) == [1, 2, 3, 4])
        #expect(got.map(\.author) == [AuthorID(1), AuthorID(1), AuthorID(2), AuthorID(1)])
        #expect(decodeAll(got) == [c1, c2, c3, c4])
    }
    // Authors never get their own batches back.
    let toTeacher = h.take(t.session)
    #expect(roomBatches(toTeacher).map(\.roomSeq) == [3])
    #expect(toTeacher.count == 1)
    let toPresenter = roomBatches(h.take(p.session))
    #expect(toPresenter.map(\.roomSeq) == [1, 2, 4])
    #expect(decodeAll(toPresenter) == [c1, c2, c4])
    #expect(h.relay.cursor(t.session) == 4 && h.relay.cursor(p.session) == 4)
}

@Test func aCommandWithoutTheRightIsRefusedToThatMemberOnly() {
    let h = Harness()
    var (t, p, v1, v2) = classroom(h)
    let (m, _) = v1.stroke(points: 3)
    h.deliver(m, from: v1.session)
    #expect(h.take(v1.session) == [.error(.permissionDenied, originSeq: 1, text: "viewers may not draw")])
    for d in [t, p, v2] { #expect(h.take(d.session).isEmpty) }
    #expect(h.appended.isEmpty)
    #expect(h.relay.roomHead("r") == 0)

    // Room commands are the teacher's.
    h.deliver(p.commands([.room(.lock)]), from: p.session)
    #expect(h.take(p.session) == [.error(.notTeacher, originSeq: 1, text: "only the teacher sends room commands")])
    // A locked board: presenters wait, the teacher draws.
    h.deliver(t.commands([.room(.lock)]), from: t.session)
    #expect(h.appended.count == 1)
    _ = h.take(p.session)
    let (pm, _) = p.stroke(points: 2)
    h.deliver(pm, from: p.session)
    #expect(h.take(p.session) == [.error(.permissionDenied, originSeq: 2, text: "the board is locked")])
    let (tm, _) = t.stroke(points: 2)
    h.deliver(tm, from: t.session)
    #expect(h.appended.count == 2)
    #expect(roomBatches(h.take(p.session)).map(\.roomSeq) == [2])
    for d in [v1, v2] { #expect(roomBatches(h.take(d.session)).map(\.roomSeq) == [1, 2]) }
}

@Test func teacherGrantsAndRevokesTheRightToDraw() {
    let h = Harness()
    var (t, p, v1, v2) = classroom(h)
    let (refused, _) = v1.stroke(points: 2)
    h.deliver(refused, from: v1.session)
    #expect(h.take(v1.session).count == 1)

    // Only the teacher may grant.
    h.deliver(.grantDraw(user: "vic"), from: p.session)
    #expect(h.take(p.session) == [.error(.notTeacher, originSeq: 0, text: "only the teacher grants or revokes drawing")])
    h.deliver(.grantDraw(user: "nobody"), from: t.session)
    #expect(h.take(t.session) == [.error(.unknownMember, originSeq: 0, text: "no user nobody in this room")])

    h.deliver(.grantDraw(user: "vic"), from: t.session)
    let announce = ServerMessage.member(id: AuthorID(3), user: "vic", role: .presenter, present: true)
    for d in [t, p, v1, v2] { #expect(h.take(d.session) == [announce]) }
    let (ok, c) = v1.stroke(points: 3)
    h.deliver(ok, from: v1.session)
    #expect(h.appended.map(\.author) == [AuthorID(3)])
    #expect(decodeAll(roomBatches(h.take(v2.session))) == [c])

    h.deliver(.revokeDraw(user: "vic"), from: t.session)
    let revoked = ServerMessage.member(id: AuthorID(3), user: "vic", role: .viewer, present: true)
    #expect(h.take(v2.session) == [revoked])
    _ = h.take(v1.session)
    let (again, _) = v1.stroke(points: 2)
    h.deliver(again, from: v1.session)
    #expect(h.take(v1.session) == [.error(.permissionDenied, originSeq: 3, text: "viewers may not draw")])
    #expect(h.appended.count == 1)

    // The decision outlives a reconnect: vic comes back asking to present, and is a viewer.
    h.relay.handleSessionClosed(v1.session, now: h.now)
    h.drain()
    var back = Device(h.open(9), origin: 13, user: "vic", role: .presenter)
    h.deliver(back.join(have: .upTo(roomSeq: 1, digest: 0)), from: back.session)
    #expect(h.take(back.session).first == .joinAccepted(member: AuthorID(3), role: .viewer, roomHead: 1, syncFollows: false))
    _ = back.apply([])
}

@Test func duplicatesAreAppendedOnceAndAcknowledgedWhenDurable() {
    let h = Harness()
    var (t, _, v1, _) = classroom(h)
    let commands = [TimedCommand(timeMs: 1, command: .point(StrokePoint(stroke: StrokeID(1), phase: .end, x: 1, y: 1)))]
    h.deliver(t.batch(commands, originSeq: 1), from: t.session)
    h.deliver(t.batch(commands, originSeq: 1), from: t.session)
    #expect(h.appended.count == 1)
    #expect(roomBatches(h.take(v1.session)).count == 1)
    #expect(h.take(t.session).isEmpty)  // not durable yet: no ack, not even for the duplicate
    #expect(h.events.contains(.batchDuplicate(room: "r", origin: 11, originSeq: 1)))

    h.durable("r", 1)
    #expect(h.take(t.session) == [.batchAck(originSeq: 1, roomSeq: 1)])
    // Sent again after it is durable: acknowledged at once, still not appended.
    h.deliver(t.batch(commands, originSeq: 1), from: t.session)
    #expect(h.take(t.session) == [.batchAck(originSeq: 1, roomSeq: 1)])

    // The device reconnects (same origin, new session): its old session is replaced and a
    // resent batch is recognised.
    var again = Device(h.open(20), origin: 11, user: "teacher", role: .teacher)
    h.deliver(again.join(have: .upTo(roomSeq: 1, digest: 0)), from: again.session)
    #expect(h.take(t.session) == [.goingAway(.replaced, text: "replaced by a new session of this device")])
    #expect(h.closed.map(\.0) == [t.session])
    _ = h.take(again.session)
    h.deliver(again.batch(commands, originSeq: 1), from: again.session)
    #expect(h.take(again.session) == [.batchAck(originSeq: 1, roomSeq: 1)])
    #expect(h.appended.count == 1)
}

@Test func acknowledgementsFollowDurabilityInRoomOrder() {
    let h = Harness()
    var (t, p, _, _) = classroom(h)
    h.deliver(t.stroke(points: 2).0, from: t.session)  // 1
    h.deliver(p.stroke(points: 2).0, from: p.session)  // 2
    h.deliver(t.stroke(points: 2).0, from: t.session)  // 3
    h.deliver(t.stroke(points: 2).0, from: t.session)  // 4
    _ = h.take(t.session)
    _ = h.take(p.session)
    h.durable("r", 2)
    #expect(h.take(t.session) == [.batchAck(originSeq: 1, roomSeq: 1)])
    #expect(h.take(p.session) == [.batchAck(originSeq: 1, roomSeq: 2)])
    h.durable("r", 2)  // again: nothing new
    #expect(h.take(t.session).isEmpty)
    h.durable("r", 99)  // past the head: up to the head
    #expect(h.take(t.session) == [.batchAck(originSeq: 2, roomSeq: 3), .batchAck(originSeq: 3, roomSeq: 4)])
    #expect(h.relay.durableRoomSeq("r") == 4)
}
