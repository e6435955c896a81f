import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

private func smallLimits() -> RelayLimits {
    var l = RelayLimits()
    l.maxLiveLag = 4
    l.syncChunkBytes = 200
    l.syncChunksInFlight = 2
    l.snapshotCommandsPerBatch = 16
    return l
}

/// A teacher drawing a lesson with undo, redo, pages and pens: `n` batches.
private func draw(_ h: Harness, _ t: inout Device, batches n: Int) {
    for i in 0..<n {
        switch i % 7 {
        case 3: h.deliver(t.commands([.undo(StrokeID(t.nextStroke - 1))]), from: t.session)
        case 5: h.deliver(t.commands([.penStyle(PenStyle(color: UInt8(i % 5), width: 2)!)]), from: t.session)
        case 6 where i % 14 == 6: h.deliver(t.commands([.addPage(PageID(UInt32(i))), .switchPage(PageID(UInt32(i)))]), from: t.session)
        default: h.deliver(t.stroke(points: 3 + i % 9, x: Int32(i)).0, from: t.session)
        }
    }
}

@Test func aSlowMemberIsResyncedFromItsCursorThenLiveWithoutGapOrDuplicate() {
    let h = Harness(limits: smallLimits())
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    var slow = Device(h.open(2), origin: 2, user: "slow", role: .viewer)
    var fast = Device(h.open(3), origin: 3, user: "fast", role: .viewer)
    h.join(&t)
    h.join(&slow)
    h.join(&fast)
    draw(h, &t, batches: 3)
    h.pumpSync(&slow)
    #expect(slow.seen == [1, 2, 3])

    h.block(slow.session)
    draw(h, &t, batches: 4)  // lag 4: still live, just waiting
    #expect(h.take(slow.session).isEmpty)
    #expect(h.relay.isLive(slow.session))
    draw(h, &t, batches: 20)  // lag 24 > 4: moved to resync
    #expect(!h.relay.isLive(slow.session))
    #expect(h.events.contains(.memberResync(room: "r", session: slow.session, cursor: 3)))
    // Others were never held back.
    h.pumpSync(&fast)
    #expect(fast.seen == Array(1...27))
    #expect(h.take(slow.session).isEmpty)

    h.ready(slow.session)
    let first = h.take(slow.session)
    #expect(first.first == .syncBegin(SyncBegin(syncID: 1, mode: .tail, afterRoomSeq: 3, throughRoomSeq: 27, firstChunk: 0)))
    // Flow control: at most two chunks before an ack.
    #expect(first.filter { if case .syncChunk = $0 { true } else { false } }.count == 2)
    var acks = slow.apply(first)
    // Live batches during the sync wait behind it.
    draw(h, &t, batches: 2)
    while !acks.isEmpty {
        for a in acks { h.deliver(a, from: slow.session) }
        acks = slow.apply(h.take(slow.session))
    }
    #expect(slow.lastDigest != nil)
    h.pumpSync(&slow)
    #expect(h.relay.isLive(slow.session))
    draw(h, &t, batches: 3)
    h.pumpSync(&slow)
    h.pumpSync(&fast)
    #expect(slow.seen == Array(1...32))
    #expect(fast.seen == Array(1...32))
    #expect(slow.board.digest == h.relay.board("r")!.digest)
    #expect(fast.board.digest == h.relay.board("r")!.digest)
}

@Test func aSlowMemberBehindTheInMemoryTailGetsASnapshot() {
    var limits = smallLimits()
    limits.tailBatches = 8
    let h = Harness(limits: limits)
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    var slow = Device(h.open(2), origin: 2, user: "slow", role: .viewer)
    h.join(&t)
    h.join(&slow)
    draw(h, &t, batches: 2)
    h.pumpSync(&slow)
    h.block(slow.session)
    draw(h, &t, batches: 30)
    h.ready(slow.session)
    let got = h.take(slow.session)
    guard case .syncBegin(let begin) = got.first else {
        Issue.record("expected a sync, got \(got.first.map { "\($0)" } ?? "nothing")")
        return
    }
    #expect(begin.mode == .snapshot && begin.throughRoomSeq == 32)
    var acks = slow.apply(got)
    while !acks.isEmpty {
        for a in acks { h.deliver(a, from: slow.session) }
        acks = slow.apply(h.take(slow.session))
    }
    #expect(slow.board.digest == h.relay.board("r")!.digest)
    #expect(h.relay.isLive(slow.session))
    draw(h, &t, batches: 2)
    h.pumpSync(&slow)
    #expect(slow.seen.suffix(2) == [33, 34])
    #expect(slow.board.digest == h.relay.board("r")!.digest)
}

@Test func aLateJoinerGetsASnapshotThenTheTailAndTheRoomsDigest() {
    let h = Harness(limits: smallLimits())
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    var early = Device(h.open(2), origin: 2, user: "early", role: .viewer)
    h.join(&t)
    h.join(&early)
    draw(h, &t, batches: 40)
    var late = Device(h.open(3), origin: 3, user: "late", role: .viewer)
    h.deliver(late.join(), from: late.session)
    let got = h.take(late.session)
    #expect(got.first == .joinAccepted(member: AuthorID(3), role: .viewer, roomHead: 40, syncFollows: true))
    #expect(got.contains(.syncBegin(SyncBegin(syncID: 1, mode: .snapshot, afterRoomSeq: 40, throughRoomSeq: 40, firstChunk: 0))))
    var acks = late.apply(got)
    // The lesson goes on during the sync: 10 more batches (beyond maxLiveLag: a tail sync follows).
    draw(h, &t, batches: 10)
    while !acks.isEmpty {
        for a in acks { h.deliver(a, from: late.session) }
        acks = late.apply(h.take(late.session))
    }
    h.pumpSync(&early)
    #expect(late.seen == Array(41...50))
    #expect(early.seen == Array(1...50))
    #expect(late.board.digest == early.board.digest)
    #expect(late.board.digest == h.relay.board("r")!.digest)
    #expect(h.relay.isLive(late.session))
}

@Test func aReconnectWithinTheTailGetsJustTheTail() {
    let h = Harness(limits: smallLimits())
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    h.join(&t)
    draw(h, &t, batches: 10)
    var v = Device(h.open(2), origin: 2, user: "v", role: .viewer)
    h.deliver(v.join(have: .upTo(roomSeq: 7, digest: 0)), from: v.session)
    let got = h.take(v.session)
    #expect(got.contains(.syncBegin(SyncBegin(syncID: 1, mode: .tail, afterRoomSeq: 7, throughRoomSeq: 10, firstChunk: 0))))
    let items = got.compactMap { if case .syncChunk(_, _, let items) = $0 { items } else { nil } }.flatMap { $0 }
    #expect(items.map(\.roomSeq) == [8, 9, 10])
    #expect(items.map(\.payload) == h.appended[7...].map(\.payload))
    // Up to date: no sync at all.
    var w = Device(h.open(3), origin: 3, user: "w", role: .viewer)
    h.deliver(w.join(have: .upTo(roomSeq: 10, digest: 0)), from: w.session)
    #expect(h.take(w.session).first == .joinAccepted(member: AuthorID(3), role: .viewer, roomHead: 10, syncFollows: false))
    _ = v.apply([])
    _ = w.apply([])
}

@Test func anInterruptedSnapshotSyncResumesAfterTheLastConfirmedChunk() {
    let h = Harness(limits: smallLimits())
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    h.join(&t)
    draw(h, &t, batches: 30)
    var v = Device(h.open(2), origin: 2, user: "v", role: .viewer)
    h.deliver(v.join(), from: v.session)
    let first = h.take(v.session)
    let chunks = first.compactMap { if case .syncChunk(_, let i, _) = $0 { i } else { nil } }
    #expect(chunks == [0, 1])
    _ = v.apply(first)
    h.deliver(.syncAck(syncID: 1, chunk: 0), from: v.session)  // confirms chunk 0 only
    _ = v.apply(h.take(v.session))
    h.relay.handleSessionClosed(v.session, now: h.now)
    h.drain()

    var back = Device(h.open(3), origin: 2, user: "v", role: .viewer)
    back.board = Board()
    h.deliver(back.join(have: .partialSnapshot(snapshotRoomSeq: 30, lastChunk: 0)), from: back.session)
    let resumed = h.take(back.session)
    #expect(resumed.contains(.syncBegin(SyncBegin(syncID: 1, mode: .snapshot, afterRoomSeq: 30, throughRoomSeq: 30, firstChunk: 1))))
    #expect(resumed.compactMap { if case .syncChunk(_, let i, _) = $0 { i } else { nil } } == [1, 2] as [UInt32])
    // A snapshot the room no longer has restarts from chunk 0.
    var other = Device(h.open(4), origin: 4, user: "o", role: .viewer)
    h.deliver(other.join(have: .partialSnapshot(snapshotRoomSeq: 29, lastChunk: 3)), from: other.session)
    #expect(h.take(other.session).contains(.syncBegin(SyncBegin(syncID: 1, mode: .snapshot, afterRoomSeq: 30, throughRoomSeq: 30, firstChunk: 0))))
    _ = other.apply([])
}

@Test func restoredRoomsMatchAndRememberTheirProducers() throws {
    let h = Harness()
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    h.join(&t)
    draw(h, &t, batches: 25)
    let restored = Relay()
    for r in h.appended { try restored.restore(r) }
    #expect(restored.roomHead("r") == 25)
    #expect(restored.board("r")!.digest == h.relay.board("r")!.digest)
    #expect(throws: RelayRestoreError.outOfOrder(expected: 26, got: 3)) { try restored.restore(h.appended[2]) }
    // The same user gets the same author; a resent batch is acknowledged, not appended, and
    // the same number with other commands is refused (docs/protocol.md 5a, originSeq rules).
    restored.handleSessionOpened(SessionID(5), transport: .tcp, now: .zero)
    restored.handleMessage(SessionMessageCodec.encode(t.join(have: .upTo(roomSeq: 25, digest: 0))), from: SessionID(5), now: .zero)
    var codec = BinaryCodecState()
    let other = try BinaryBatchCodec.encode(Batch(author: AuthorID(1), commands: [TimedCommand(timeMs: 0, command: .clear)]), state: &codec)
    restored.handleMessage(SessionMessageCodec.encode(ClientMessage.batch(originSeq: 25, payload: other)), from: SessionID(5), now: .zero)
    var stored = BinaryCodecState()
    let original = try BinaryBatchCodec.decode(h.appended[24].payload, state: &stored)
    let again = try BinaryBatchCodec.encode(Batch(author: AuthorID(1), commands: original.commands), state: &codec)
    restored.handleMessage(SessionMessageCodec.encode(ClientMessage.batch(originSeq: 25, payload: again)), from: SessionID(5), now: .zero)
    var out: [RelayOutput] = []
    while let o = restored.pollOutput() { out.append(o) }
    #expect(out.contains(.send(SessionID(5), .joinAccepted(member: AuthorID(1), role: .teacher, roomHead: 25, syncFollows: false))))
    #expect(out.contains { if case .send(SessionID(5), .error(.originSeqReused, 25, _)) = $0 { true } else { false } })
    #expect(out.contains(.send(SessionID(5), .batchAck(originSeq: 25, roomSeq: 25))))
    #expect(!out.contains { if case .append = $0 { true } else { false } })
    #expect(RelayRecord.parseAuthorLabel(h.appended[0].authorLabel)! == (AuthorID(1), "t"))
}

@Test func aCompactedRoomRestoresItsBoardAuthorsRightsAndProducers() throws {
    let h = Harness()
    var t = Device(h.open(1), origin: 1, user: "t", role: .teacher)
    var v = Device(h.open(2), origin: 2, user: "v", role: .viewer)
    h.join(&t)
    h.join(&v)
    draw(h, &t, batches: 20)
    h.deliver(.grantDraw(user: "v"), from: t.session)
    let record = try #require(h.relay.snapshotRecord(room: "r"))
    #expect(record.throughRoomSeq == 20)
    #expect(record.users.map(\.name) == ["t", "v"] && record.users[1].drawRight == true)
    let bytes = record.encode()
    #expect(try RoomSnapshotRecord.decode(bytes) == record)
    for cut in [0, 1, 5, bytes.count / 2, bytes.count - 1] {
        #expect(throws: RelayRestoreError.self) { try RoomSnapshotRecord.decode(Array(bytes[0..<cut])) }
    }
    draw(h, &t, batches: 5)

    let restored = Relay()
    try restored.restore(snapshot: RoomSnapshotRecord.decode(bytes))
    for r in h.appended where r.roomSeq > 20 { try restored.restore(r) }
    #expect(restored.roomHead("r") == 25)
    #expect(restored.board("r")!.digest == h.relay.board("r")!.digest)
    var tampered = record
    tampered.digest ^= 1
    #expect(throws: RelayRestoreError.digestMismatch(roomSeq: 20)) { try Relay().restore(snapshot: tampered) }
    // v comes back as the same author with its granted right; t's resent batch 3 is known.
    restored.handleSessionOpened(SessionID(9), transport: .udp, now: .zero)
    restored.handleMessage(SessionMessageCodec.encode(v.join(have: .nothing)), from: SessionID(9), now: .zero)
    var out: [RelayOutput] = []
    while let o = restored.pollOutput() { out.append(o) }
    #expect(out.contains(.send(SessionID(9), .joinAccepted(member: AuthorID(2), role: .presenter, roomHead: 25, syncFollows: true))))
}
