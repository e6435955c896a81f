import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// Tokens as a school's app server would issue them, in miniature: the token is the role it
/// grants ("teacher", "presenter", "viewer") for the user and room the join names. Legacy apps
/// (users "legacy-...") join without one, as the daemon makes their joins.
private struct SchoolTokens: JoinAuthorizer {
    var requiresTokens: Bool { true }
    func authorize(_ request: JoinRequest, now: Instant) -> JoinAuthorization {
        if request.token.isEmpty {
            return request.user.hasPrefix("legacy") ? .open : .refused(.badToken, text: "a token is needed")
        }
        let granted: MemberRole
        switch String(decoding: request.token, as: UTF8.self) {
        case "teacher": granted = .teacher
        case "presenter": granted = .presenter
        case "viewer": granted = .viewer
        default: return .refused(.badToken, text: "bad token")
        }
        return .verified(TokenClaims(room: request.room, user: request.user, role: granted, expiresAtMs: 1 << 40))
    }
}

/// The daemon's default quotas (`DaemonLimits`), without the timers unless a test sets them.
private func schoolQuotas() -> RelayQuotas {
    var q = RelayQuotas()
    q.maxSessionsPerUser = 4
    q.maxSessionsPerAddress = 8
    q.maxLegacyPerAddress = 3
    q.memberReserve = 8
    return q
}

private func seconds(_ s: UInt64) -> Instant.Duration { .milliseconds(s * 1000) }

private func accepted(_ m: ServerMessage?) -> Bool {
    if case .joinAccepted = m { return true }
    return false
}

/// One stroke of `points` points, as a legacy translator hands it over.
private func stroke(_ id: UInt32, points: Int = 3) -> [TimedCommand] {
    (0..<points).map { i in
        let phase: StrokePhase = i == 0 ? .start : (i == points - 1 ? .end : .move)
        return TimedCommand(timeMs: UInt64(i) * 16, command: .point(StrokePoint(stroke: StrokeID(id), phase: phase, x: Int32(i), y: 7)))
    }
}

extension Harness {
    /// Opens session `id` (from `source`) and joins `room` as `user`; returns the first answer.
    @discardableResult
    fileprivate func member(_ id: UInt64, _ user: String, _ role: MemberRole = .viewer, token: String = "", room: String = "r",
                            from source: String? = nil, _ transport: TransportKind = .udp) -> ServerMessage? {
        let s = open(id, transport, source: source.map(SourceHost.init))
        deliver(.join(JoinRequest(room: room, user: user, role: role, token: Array(token.utf8), origin: id)), from: s)
        return take(s).first
    }

    /// Moves virtual time on by `duration`, firing the relay's timer when it is due, as the
    /// daemon's loop does.
    fileprivate func advance(_ duration: Instant.Duration) {
        let end = now + duration
        while let due = relay.pollTimeout(), due <= end {
            if now < due { now = due }
            relay.handleTimeout(now: now)
            drain()
        }
        now = end
    }

    fileprivate var quotaRefusals: [(RelayQuota, String)] {
        events.compactMap { if case .quotaRefused(_, _, let q, let offender) = $0 { (q, offender) } else { nil } }
    }
}

/// The first attack: one viewer token opens 256 sessions as the same user. Only four
/// get in; the teacher's token joins and draws, and a watcher gets exactly the teacher's stroke.
@Test func oneViewerTokenCannotFillTheRoomAndTheTeacherStillDraws() {
    var limits = RelayLimits()
    limits.maxMembersPerRoom = 256
    let h = Harness(limits: limits, authorizer: SchoolTokens())
    h.relay.updateQuotas(schoolQuotas(), now: h.now)
    var watcher = Device(h.open(1, source: SourceHost("10.0.0.9")), origin: 1, user: "cy", role: .viewer)
    h.deliver(watcher.join(token: Array("viewer".utf8)), from: watcher.session)
    h.pumpSync(&watcher)
    var answers: [ServerMessage?] = []
    for i in 0..<256 as Range<UInt64> { answers.append(h.member(100 + i, "bo", token: "viewer", from: "10.0.0.66")) }
    #expect(answers.prefix(4).allSatisfy(accepted))
    #expect(answers.dropFirst(4).allSatisfy { $0 == .joinRefused(.quotaExceeded, text: "user bo has 4 sessions in this room, the most one user may (none idle)") })
    #expect(h.relay.sessions(in: "r").count == 5)
    #expect(h.quotaRefusals.count == 252 && h.quotaRefusals.allSatisfy { $0 == (.sessionsPerUser, "user bo") })

    var teacher = Device(h.open(500, source: SourceHost("10.0.0.1")), origin: 500, user: "ana", role: .teacher)
    h.deliver(teacher.join(token: Array("teacher".utf8)), from: teacher.session)
    h.pumpSync(&teacher)
    #expect(teacher.author != nil && teacher.role == .teacher)
    let (batch, commands) = teacher.stroke(points: 6)
    h.deliver(batch, from: teacher.session)
    h.durable("r", 1)
    let got = h.take(watcher.session)
    #expect(decodeAll(roomBatches(got)) == [commands])
}

@Test func atItsSessionBoundAUsersOldestIdleSessionMakesWay() {
    let h = Harness()
    var q = RelayQuotas()
    q.maxSessionsPerUser = 2
    h.relay.updateQuotas(q, now: h.now)
    let first = h.open(1)
    h.deliver(.join(JoinRequest(room: "r", user: "bo", role: .presenter, origin: 1)), from: first)
    h.now = h.now + seconds(10)
    #expect(accepted(h.member(2, "bo", .presenter)))
    h.now = h.now + seconds(20)
    // Neither of bo's sessions is idle yet (joined 30 s and 20 s ago).
    #expect(h.member(3, "bo", .presenter) == .joinRefused(.quotaExceeded, text: "user bo has 2 sessions in this room, the most one user may (none idle)"))
    // The first draws at 40 s; at 65 s only the second is idle (joined at 10 s, never drew).
    h.now = Instant.zero + seconds(40)
    var d = Device(first, origin: 1, user: "bo", role: .presenter)
    _ = h.take(first)
    h.deliver(d.stroke(points: 2).0, from: first)
    h.now = Instant.zero + seconds(71)
    #expect(accepted(h.member(4, "bo", .presenter)))
    #expect(h.take(SessionID(2)).last == .goingAway(.evicted, text: "a newer session of this user took the place of this idle one"))
    #expect(h.closed.map(\.0) == [SessionID(2)])
    #expect(h.relay.sessions(in: "r") == [SessionID(1), SessionID(4)])
    #expect(h.events.contains(.memberEvicted(room: "r", session: SessionID(2), user: "bo", quota: .sessionsPerUser)))
}

@Test func aDeviceThatReconnectsIsNotCountedAgainstItself() {
    let h = Harness()
    var q = RelayQuotas()
    q.maxSessionsPerUser = 1
    q.maxSessionsPerAddress = 1
    h.relay.updateQuotas(q, now: h.now)
    #expect(accepted(h.member(1, "bo", from: "10.0.0.5")))
    // The same device (origin 1) on a new sealed session: its join comes before it is confirmed.
    let again = SessionID(2)
    h.relay.handleSessionOpened(again, transport: .udp, confirmed: false, source: SourceHost("10.0.0.5"), now: h.now)
    h.deliver(.join(JoinRequest(room: "r", user: "bo", role: .viewer, origin: 1)), from: again)
    #expect(accepted(h.take(again).first))
    h.relay.handleSessionConfirmed(again, now: h.now)
    h.drain()
    #expect(h.take(SessionID(1)).last == .goingAway(.replaced, text: "replaced by a new session of this device"))
    #expect(h.relay.sessions(in: "r") == [again])
}

@Test func oneAddressHoldsAtMostItsSessionsButATeachersTokenIsNotHeldBack() {
    let h = Harness(authorizer: SchoolTokens())
    var q = RelayQuotas()
    q.maxSessionsPerAddress = 2
    q.maxLegacyPerAddress = 1
    h.relay.updateQuotas(q, now: h.now)
    #expect(accepted(h.member(1, "v1", token: "viewer", from: "10.0.0.7")))
    #expect(accepted(h.member(2, "v2", token: "viewer", from: "10.0.0.7")))
    #expect(h.member(3, "v3", token: "viewer", from: "10.0.0.7")
            == .joinRefused(.quotaExceeded, text: "address 10.0.0.7 has 2 sessions in this room, the most one address may"))
    #expect(accepted(h.member(4, "ana", .teacher, token: "teacher", from: "10.0.0.7")))
    #expect(accepted(h.member(5, "v5", token: "viewer", from: "10.0.0.8")))
    // Sessions the daemon does not count (an exempt network) are not held back.
    for i in 6..<12 as Range<UInt64> { #expect(accepted(h.member(i, "x\(i)", token: "viewer"))) }
    // Legacy connections are counted apart, per room.
    let legacy = h.open(20, .legacy, source: SourceHost("10.0.0.7"))
    h.deliver(.join(JoinRequest(room: "r", user: "legacy-20", role: .presenter, origin: 20)), from: legacy)
    #expect(h.legacy[legacy]?.isEmpty == false)
    #expect(h.member(21, "legacy-21", .presenter, from: "10.0.0.7", .legacy)
            == .joinRefused(.quotaExceeded, text: "address 10.0.0.7 has 1 legacy connections in this room, the most one address may"))
    #expect(h.member(22, "legacy-22", .presenter, room: "other", from: "10.0.0.7", .legacy) == nil)
    #expect(h.quotaRefusals.map(\.0) == [.sessionsPerAddress, .legacyPerAddress])
    #expect(h.quotaRefusals.allSatisfy { $0.1 == "address 10.0.0.7" })
}

/// A room full of members: viewers and legacy apps stop short of the reserve; teacher and
/// presenter tokens take it, and in a room full to the bound a teacher's token takes the place
/// of an idle viewer of its own user first, then of the idle member without a token that acted
/// longest ago.
@Test func theReserveKeepsTheTeacherInAFullRoom() {
    var limits = RelayLimits()
    limits.maxMembersPerRoom = 10
    let h = Harness(limits: limits, authorizer: SchoolTokens())
    var q = RelayQuotas()
    q.memberReserve = 2
    h.relay.updateQuotas(q, now: h.now)
    for i in 0..<5 as Range<UInt64> { #expect(accepted(h.member(1 + i, "v\(i)", token: "viewer"))) }
    #expect(accepted(h.member(6, "ana", token: "viewer")))  // the teacher's projector, watching
    let l0 = h.open(7, .legacy), l1 = h.open(8, .legacy)
    h.deliver(.join(JoinRequest(room: "r", user: "legacy-7", role: .presenter, origin: 7)), from: l0)
    h.deliver(.join(JoinRequest(room: "r", user: "legacy-8", role: .presenter, origin: 8)), from: l1)
    let keptBack = "the room has 8 members (2 more places are kept for teachers and presenters)"
    #expect(h.member(9, "v9", token: "viewer") == .joinRefused(.roomFull, text: keptBack))
    #expect(h.member(10, "legacy-10", .presenter, .legacy) == .joinRefused(.roomFull, text: keptBack))
    #expect(accepted(h.member(11, "pia", .presenter, token: "presenter")))
    #expect(accepted(h.member(12, "dee", .teacher, token: "teacher")))
    #expect(h.relay.sessions(in: "r").count == 10)
    // Full, and nobody idle yet: even a teacher's token waits.
    #expect(h.member(13, "ana", .teacher, token: "teacher") == .joinRefused(.roomFull, text: "the room has 10 members"))
    // The first legacy app draws at 30 s; at 61 s the others have been idle for a minute.
    h.now = Instant.zero + seconds(30)
    h.relay.handleLegacyCommands(stroke(1), originSeq: 1, from: l0, now: h.now)
    h.drain()
    h.now = Instant.zero + seconds(61)
    #expect(accepted(h.member(14, "ana", .teacher, token: "teacher")))
    #expect(h.take(SessionID(6)).last == .goingAway(.evicted, text: "the room is full: this idle session made way for a teacher"))
    #expect(accepted(h.member(15, "eve", .teacher, token: "teacher")))
    #expect(h.take(l1).last == .goingAway(.evicted, text: "the room is full: this idle session made way for a teacher"))
    // The app that drew at 30 s is not idle; token viewers never make way for someone else.
    #expect(h.member(16, "fay", .teacher, token: "teacher") == .joinRefused(.roomFull, text: "the room has 10 members"))
    #expect(h.closed.map(\.0) == [SessionID(6), l1])
    #expect(h.events.filter { if case .memberEvicted(_, _, _, .memberReserve) = $0 { true } else { false } }.count == 2)
}

@Test func onAnOpenDaemonTheWholeRoomIsForEveryone() {
    var limits = RelayLimits()
    limits.maxMembersPerRoom = 4
    let h = Harness(limits: limits)
    var q = RelayQuotas()
    q.memberReserve = 2
    h.relay.updateQuotas(q, now: h.now)
    for i in 0..<4 as Range<UInt64> { #expect(accepted(h.member(1 + i, "v\(i)"))) }
    // Nothing can prove a teacher here: no reserve, nobody made to leave.
    #expect(h.member(5, "ana", .teacher) == .joinRefused(.roomFull, text: "the room has 4 members"))
}

/// Members that say nothing are closed after the timeout; a watcher's pings keep it in, and
/// legacy apps are left to their own heartbeat (their transport times them out).
@Test func silentMembersAreClosedAndPingsKeepWatchersIn() {
    let h = Harness()
    var q = RelayQuotas()
    q.memberTimeout = seconds(120)
    h.relay.updateQuotas(q, now: h.now)
    let pinging = h.open(1), silent = h.open(2), app = h.open(3, .legacy)
    h.deliver(.join(JoinRequest(room: "r", user: "a", role: .viewer, origin: 1)), from: pinging)
    h.deliver(.join(JoinRequest(room: "r", user: "b", role: .viewer, origin: 2)), from: silent)
    h.deliver(.join(JoinRequest(room: "r", user: "legacy-3", role: .presenter, origin: 3)), from: app)
    for _ in 0..<6 {
        h.advance(SessionKeepalive.interval)
        h.deliver(.ping, from: pinging)
    }
    #expect(h.closed.map(\.0) == [silent])
    #expect(h.take(silent).last == .goingAway(.idle, text: "nothing heard from this device for 120 s"))
    #expect(h.events.contains(.memberTimedOut(room: "r", session: silent, user: "b")))
    h.advance(seconds(600))
    #expect(h.closed.map(\.0) == [silent, pinging])
    #expect(h.relay.sessions(in: "r") == [app])
    // A ping of a session that has not joined does not keep it past the join timeout.
    let late = h.open(4)
    h.deliver(.ping, from: late)
    h.advance(seconds(11))
    #expect(h.closed.last?.0 == late)
}

@Test func oneAddressCreatesAtMostItsRoomsPerMinuteOnAnOpenDaemon() {
    let h = Harness()
    var q = RelayQuotas()
    q.roomsPerAddressPerMinute = 3
    h.relay.updateQuotas(q, now: h.now)
    for (i, room) in ["a", "b", "c"].enumerated() { #expect(accepted(h.member(UInt64(1 + i), "s", room: room, from: "10.0.0.5"))) }
    let tooMany = ServerMessage.joinRefused(.quotaExceeded, text: "address 10.0.0.5 created 3 rooms in the last minute; try again in a minute")
    #expect(h.member(4, "s", room: "d", from: "10.0.0.5") == tooMany)
    // Another host creates its room; the spammer may still join rooms that exist.
    #expect(accepted(h.member(5, "t", room: "e", from: "10.0.0.6")))
    #expect(accepted(h.member(6, "s2", room: "e", from: "10.0.0.5")))
    // Exempt sessions (nil) and legacy rooms (fixed by the operator) are not counted.
    for i in 0..<5 as Range<UInt64> { #expect(accepted(h.member(10 + i, "x", room: "x\(i)"))) }
    #expect(h.member(20, "legacy-20", .presenter, room: "lesson", from: "10.0.0.5", .legacy) == nil)
    // One more every 20 s (60 s / 3).
    h.advance(seconds(20))
    #expect(accepted(h.member(21, "s", room: "d", from: "10.0.0.5")))
    #expect(h.member(22, "s", room: "f", from: "10.0.0.5") == tooMany)
    #expect(h.quotaRefusals.map(\.0) == [.roomsPerAddress, .roomsPerAddress])
}

@Test func tokenJoinsCreateRoomsUncounted() {
    let h = Harness(authorizer: SchoolTokens())
    var q = RelayQuotas()
    q.roomsPerAddressPerMinute = 1
    h.relay.updateQuotas(q, now: h.now)
    for i in 0..<4 as Range<UInt64> { #expect(accepted(h.member(1 + i, "ana", .teacher, token: "teacher", room: "r\(i)", from: "10.0.0.1"))) }
}

/// The third attack in small: empty rooms fill the daemon; once their members leave,
/// rooms that never had a batch are released and their places come back. A room with history
/// stays (it comes back from the store at a restart anyway).
@Test func emptyRoomsAreReleasedAndTheirPlacesComeBack() {
    var limits = RelayLimits()
    limits.maxRooms = 2
    let h = Harness(limits: limits)
    var q = RelayQuotas()
    q.emptyRoomExpiry = seconds(30)
    h.relay.updateQuotas(q, now: h.now)
    let a = h.open(1)
    h.deliver(.join(JoinRequest(room: "x", user: "a", role: .viewer, origin: 1)), from: a)
    var b = Device(h.open(2), origin: 2, user: "b", role: .teacher)
    h.join(&b, room: "y")
    h.deliver(b.stroke(points: 3).0, from: b.session)
    h.durable("y", 1)
    #expect(h.member(3, "c", room: "z") == .joinRefused(.tooManyRooms, text: "the daemon holds 2 rooms"))
    h.deliver(.leave, from: a)
    h.deliver(.leave, from: b.session)
    h.advance(seconds(20))
    #expect(h.relay.roomNames == ["x", "y"])
    h.advance(seconds(12))
    #expect(h.relay.roomNames == ["y"])
    #expect(h.events.contains(.roomReleased(room: "x")) && !h.events.contains(.roomReleased(room: "y")))
    #expect(accepted(h.member(4, "c", room: "z")))
    // A room that is joined again before it expires is kept.
    h.deliver(.leave, from: SessionID(4))
    h.advance(seconds(10))
    #expect(accepted(h.member(5, "d", room: "z")))
    h.advance(seconds(60))
    #expect(h.relay.roomNames == ["y", "z"])
}

@Test func quotasChangeForLaterJoinsOnly() {
    let h = Harness()
    var q = RelayQuotas()
    q.maxSessionsPerUser = 1
    h.relay.updateQuotas(q, now: h.now)
    #expect(accepted(h.member(1, "bo")))
    #expect(h.member(2, "bo") == .joinRefused(.quotaExceeded, text: "user bo has 1 sessions in this room, the most one user may (none idle)"))
    q.maxSessionsPerUser = 3
    h.relay.updateQuotas(q, now: h.now)
    #expect(accepted(h.member(3, "bo")))
    q.maxSessionsPerUser = 1
    h.relay.updateQuotas(q, now: h.now)
    h.relay.updateRoomBounds(maxRooms: 1, maxMembersPerRoom: 1)
    #expect(h.relay.sessions(in: "r") == [SessionID(1), SessionID(3)] && h.closed.isEmpty)
    #expect(h.member(4, "cy") == .joinRefused(.roomFull, text: "the room has 2 members"))
    #expect(h.member(5, "cy", room: "s") == .joinRefused(.tooManyRooms, text: "the daemon holds 1 rooms"))
    // With every quota off, the relay sets no sweep timer.
    h.relay.updateQuotas(RelayQuotas(), now: h.now)
    #expect(h.relay.pollTimeout() == Instant.zero + .milliseconds(10_000))  // session 2's join deadline
}

/// A handshake replayed from the Wi-Fi carries a real token but never confirms: its join that
/// would need someone to make way is held, and closes nobody; the device's own join, once it
/// proves its keys, does.
@Test func aReplayedTeacherHandshakeClosesNobody() {
    var limits = RelayLimits()
    limits.maxMembersPerRoom = 3
    let h = Harness(limits: limits, authorizer: SchoolTokens())
    var q = RelayQuotas()
    q.memberReserve = 1
    h.relay.updateQuotas(q, now: h.now)
    #expect(accepted(h.member(1, "v0", token: "viewer")))
    let app = h.open(2, .legacy)
    h.deliver(.join(JoinRequest(room: "r", user: "legacy-2", role: .presenter, origin: 2)), from: app)
    #expect(accepted(h.member(3, "ana", .teacher, token: "teacher")))
    h.now = Instant.zero + seconds(61)
    let teacherJoin = ClientMessage.join(JoinRequest(room: "r", user: "dee", role: .teacher, token: Array("teacher".utf8), origin: 40))
    let replay = SessionID(4)
    h.relay.handleSessionOpened(replay, transport: .udp, confirmed: false, now: h.now)
    h.deliver(teacherJoin, from: replay)
    #expect(h.take(replay).isEmpty && h.closed.isEmpty)
    h.advance(seconds(11))
    #expect(h.closed.map(\.0) == [replay] && h.relay.sessions(in: "r").contains(app))
    // The device itself: held until it confirms, then the idle app makes way.
    let device = SessionID(5)
    h.relay.handleSessionOpened(device, transport: .udp, confirmed: false, now: h.now)
    h.deliver(teacherJoin, from: device)
    #expect(h.take(device).isEmpty)
    h.relay.handleSessionConfirmed(device, now: h.now)
    h.drain()
    #expect(accepted(h.take(device).first))
    #expect(h.take(app).last == .goingAway(.evicted, text: "the room is full: this idle session made way for a teacher"))
    #expect(h.relay.sessions(in: "r") == [SessionID(1), SessionID(3), device])
}

/// Replays of a user's handshake (its first device's origin) do not keep the user's other
/// devices out: they are unconfirmed, so they make way first.
@Test func replaysOfAUsersHandshakeDoNotHoldItsPlaces() {
    let h = Harness(authorizer: SchoolTokens())
    var q = RelayQuotas()
    q.maxSessionsPerUser = 2
    h.relay.updateQuotas(q, now: h.now)
    #expect(accepted(h.member(1, "ana", .teacher, token: "teacher")))
    let join = ClientMessage.join(JoinRequest(room: "r", user: "ana", role: .teacher, token: Array("teacher".utf8), origin: 1))
    for id in 2...4 as ClosedRange<UInt64> {
        h.relay.handleSessionOpened(SessionID(id), transport: .udp, confirmed: false, now: h.now)
        h.deliver(join, from: SessionID(id))
    }
    #expect(h.relay.sessions(in: "r").count == 4)
    #expect(accepted(h.member(9, "ana", .teacher, token: "teacher")))
    #expect(h.closed.map(\.0) == [SessionID(2), SessionID(3), SessionID(4)])
    #expect(h.relay.sessions(in: "r") == [SessionID(1), SessionID(9)])
}
