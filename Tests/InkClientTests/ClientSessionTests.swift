import InkClient
import InkCodec
import InkProtocol
import InkRelay
import Testing

private func acked(_ c: ClientRelayHarness.Client, through originSeq: UInt64) -> Bool {
    c.events.contains { if case .acknowledged(let s, _) = $0 { s >= originSeq } else { false } }
}

private func joined(_ c: ClientRelayHarness.Client) -> Bool {
    c.events.contains { if case .joined = $0 { true } else { false } }
}

private func syncDone(_ c: ClientRelayHarness.Client) -> (matches: Bool, roomSeq: UInt64)? {
    for e in c.events { if case .syncDone(let seq, _, let m) = e { return (m, seq) } }
    return nil
}

/// Sends `commands` cut as a live sender cuts them; returns the last originSeq.
@discardableResult
private func sendLesson(_ h: ClientRelayHarness, _ sender: ClientRelayHarness.Client, _ commands: [TimedCommand]) throws -> UInt64 {
    var last: UInt64 = 0
    for batch in Batch.cut(commands, author: AuthorID(0)) { last = try sender.session.send(batch.commands, now: h.now) }
    return last
}

@Test func watchersOverUDPAndTCPReceiveExactlyTheSentCommandsInOrder() throws {
    let h = ClientRelayHarness()
    let teacher = h.join(user: "teacher", role: .teacher)
    let udpWatcher = h.join(user: "w1", role: .viewer)
    let tcpWatcher = h.join(user: "w2", role: .viewer, datagram: false)
    #expect(h.run { joined(teacher) && joined(udpWatcher) && joined(tcpWatcher) })
    let lesson = syntheticLesson(strokes: 20, points: 30)
    let last = try sendLesson(h, teacher, lesson)
    #expect(h.run { acked(teacher, through: last) && tcpWatcher.deliveredCommands.count == lesson.count && udpWatcher.deliveredCommands.count == lesson.count })
    #expect(udpWatcher.deliveredCommands == lesson)
    #expect(tcpWatcher.deliveredCommands == lesson)
    let digest = try #require(h.relay.board("r")).digest
    #expect(udpWatcher.session.board.digest == digest)
    #expect(tcpWatcher.session.board.digest == digest)
    // The sender folds its own batches at the room sequence numbers its acks name.
    #expect(teacher.session.board.digest == digest)
    #expect(teacher.session.appliedRoomSeq == h.relay.roomHead("r"))
    #expect(teacher.session.unacknowledgedCount == 0)
}

@Test func twoAuthorsInterleaveAndEveryoneFoldsTheSameBoard() throws {
    let h = ClientRelayHarness()
    let teacher = h.join(user: "teacher", role: .teacher)
    let presenter = h.join(user: "p", role: .presenter, datagram: false)
    let watcher = h.join(user: "w", role: .viewer)
    #expect(h.run { joined(teacher) && joined(presenter) && joined(watcher) })
    let a = Batch.cut(syntheticLesson(strokes: 6, points: 10), author: AuthorID(0))
    let b = Batch.cut(syntheticLesson(strokes: 5, points: 12), author: AuthorID(0))
    var lastA: UInt64 = 0, lastB: UInt64 = 0
    for i in 0..<max(a.count, b.count) {
        if i < a.count { lastA = try teacher.session.send(a[i].commands, now: h.now) }
        if i < b.count { lastB = try presenter.session.send(b[i].commands, now: h.now) }
        h.settle() // lets the two authors' batches interleave in the relay
    }
    #expect(h.run { acked(teacher, through: lastA) && acked(presenter, through: lastB) && watcher.session.appliedRoomSeq == h.relay.roomHead("r") })
    let digest = try #require(h.relay.board("r")).digest
    #expect(watcher.session.board.digest == digest)
    #expect(teacher.session.board.digest == digest)
    #expect(presenter.session.board.digest == digest)
}

@Test func lateJoinerGetsTheBoardAsSnapshotAndExportJoinerGetsTheTimedTail() throws {
    let h = ClientRelayHarness()
    let teacher = h.join(user: "teacher", role: .teacher)
    #expect(h.run { joined(teacher) })
    let lesson = syntheticLesson(strokes: 12, points: 25)
    let last = try sendLesson(h, teacher, lesson)
    #expect(h.run { acked(teacher, through: last) })
    let late = h.join(user: "late", role: .viewer)
    let exporter = h.join(user: "export", role: .viewer, datagram: false, have: .upTo(roomSeq: 0, digest: 0))
    #expect(h.run { syncDone(late) != nil && syncDone(exporter) != nil })
    let digest = try #require(h.relay.board("r")).digest
    #expect(syncDone(late)?.matches == true)
    #expect(late.session.board.digest == digest)
    #expect(syncDone(exporter)?.matches == true)
    // The tail carries every batch with the author's own times: the lesson, exactly.
    #expect(exporter.deliveredCommands == lesson)
    #expect(exporter.events.allSatisfy { if case .delivered(let b) = $0 { b.fromSync && b.roomSeq > 0 } else { true } })
}

@Test func viewerBatchIsRefusedAndForgotten() throws {
    let h = ClientRelayHarness()
    let viewer = h.join(user: "v", role: .viewer)
    #expect(h.run { joined(viewer) })
    let seq = try viewer.session.send(syntheticLesson(strokes: 1, points: 3), now: h.now)
    #expect(h.run { viewer.events.contains { if case .error = $0 { true } else { false } } })
    let errors = viewer.events.compactMap { e -> SessionErrorCode? in if case .error(let c, let s, _) = e, s == seq { return c } else { return nil } }
    #expect(errors == [.permissionDenied])
    #expect(viewer.session.unacknowledgedCount == 0)
    #expect(h.relay.roomHead("r") == 0)
}

@Test func reconnectSendsUnacknowledgedBatchesAgainAndTheRoomAppendsEachOnce() throws {
    let h = ClientRelayHarness()
    let teacher = h.join(user: "teacher", role: .teacher)
    let watcher = h.join(user: "w", role: .viewer, datagram: false)
    #expect(h.run { joined(teacher) && joined(watcher) })
    let batches = Batch.cut(syntheticLesson(strokes: 10, points: 20), author: AuthorID(0))
    // Half go through; the rest are sent while the link is down (lost with it).
    let half = batches.count / 2
    for b in batches[..<half] { try teacher.session.send(b.commands, now: h.now) }
    #expect(h.run { acked(teacher, through: UInt64(half)) })
    teacher.connected = false
    for b in batches[half...] { try teacher.session.send(b.commands, now: h.now) }
    h.settle()
    #expect(teacher.session.unacknowledgedCount == batches.count - half)
    h.reconnect(teacher)
    // Drawn before the rejoin is answered: goes after the resent ones, numbers in order.
    let more = Batch.cut(syntheticLesson(strokes: 2, points: 5), author: AuthorID(0)).map(\.commands)
    for m in more { try teacher.session.send(m, now: h.now) }
    let total = UInt64(batches.count + more.count)
    #expect(h.run { acked(teacher, through: total) && watcher.session.appliedRoomSeq == total })
    #expect(h.relay.roomHead("r") == total)
    #expect(watcher.deliveredCommands == batches.flatMap(\.commands) + more.flatMap { $0 })
    let rejoins = teacher.events.filter { if case .joined = $0 { true } else { false } }.count
    #expect(rejoins == 2)
    #expect(teacher.session.board.digest == h.relay.board("r")!.digest)
}

@Test func interruptedSnapshotSyncResumesAfterTheLastConfirmedChunk() throws {
    var limits = RelayLimits()
    limits.syncChunkBytes = 256
    limits.snapshotCommandsPerBatch = 16
    let h = ClientRelayHarness(limits: limits)
    let teacher = h.join(user: "teacher", role: .teacher)
    #expect(h.run { joined(teacher) })
    let last = try sendLesson(h, teacher, syntheticLesson(strokes: 30, points: 20))
    #expect(h.run { acked(teacher, through: last) })
    let late = h.join(user: "late", role: .viewer, datagram: false)
    late.cutWhen = { if case .syncProgress(_, let chunk, _) = $0 { chunk == 2 } else { false } }
    #expect(h.run { !late.connected })
    #expect(syncDone(late) == nil)
    h.reconnect(late, datagram: false)
    #expect(h.run { syncDone(late) != nil })
    let begins = late.events.compactMap { e -> SyncBegin? in if case .syncStarted(let b) = e { return b } else { return nil } }
    try #require(begins.count == 2)
    #expect(begins[0].firstChunk == 0)
    #expect(begins[1].mode == .snapshot && begins[1].firstChunk == 3)
    #expect(syncDone(late)?.matches == true)
    #expect(late.session.board.digest == h.relay.board("r")!.digest)
}

/// A device that only watches pings every `SessionKeepalive.interval`, so a daemon that closes
/// silent members (here after 60 s) keeps it through ten quiet minutes, over UDP and TCP.
@Test func aWatcherThatOnlyWatchesIsNotTakenForGone() throws {
    let h = ClientRelayHarness()
    var quotas = RelayQuotas()
    quotas.memberTimeout = .milliseconds(60_000)
    h.relay.updateQuotas(quotas, now: h.now)
    let udpWatcher = h.join(user: "w1", role: .viewer)
    let tcpWatcher = h.join(user: "w2", role: .viewer, datagram: false)
    #expect(h.run { joined(udpWatcher) && joined(tcpWatcher) })
    // A member that says nothing at all, for comparison: the daemon closes it.
    let mute = SessionID(999)
    h.relay.handleSessionOpened(mute, transport: .tcp, now: h.now)
    h.relay.handleMessage(SessionMessageCodec.encode(.join(JoinRequest(room: "r", user: "mute", role: .viewer, origin: 999))), from: mute, now: h.now)
    let until = h.now + .milliseconds(600_000)
    #expect(h.run { h.now >= until })
    #expect(h.relay.sessions(in: "r").count == 2 && !h.relay.sessions(in: "r").contains(mute))
    for watcher in [udpWatcher, tcpWatcher] {
        #expect(!watcher.events.contains { if case .goingAway = $0 { true } else { false } })
        #expect(!watcher.session.hasEnded)
    }
}
