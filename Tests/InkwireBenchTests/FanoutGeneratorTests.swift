import Glibc
@testable import InkCodec
import InkUV
import Testing
@testable import inkwire_bench

/// A room's batch reference: a roomSeq is recorded once, found again only with the same bytes,
/// never replaced (by an older roomSeq either), and an entry pushed out reads as unusable.
@Test func fanoutBatchReferenceMatchesOnlyTheRecordedBytes() {
    let reference = FanoutBatchReference()
    guard case .unrecorded = reference.find(roomSeq: 1, payload: [1, 2, 3]) else {
        Issue.record("a fresh reference holds nothing")
        return
    }
    var state = BinaryCodecState()
    state.commit(.initial, author: AuthorID(9))
    reference.record(roomSeq: 1, payload: [1, 2, 3], after: state)
    guard case .match(let after) = reference.find(roomSeq: 1, payload: [1, 2, 3]) else {
        Issue.record("the recorded bytes match")
        return
    }
    #expect(after.lastAuthor == AuthorID(9))
    guard case .unusable = reference.find(roomSeq: 1, payload: [1, 2, 4]) else {
        Issue.record("other bytes are unusable")
        return
    }
    // Written once: a second record of roomSeq 1 changes nothing.
    reference.record(roomSeq: 1, payload: [7], after: BinaryCodecState())
    guard case .match = reference.find(roomSeq: 1, payload: [1, 2, 3]) else {
        Issue.record("roomSeq 1 kept its first bytes")
        return
    }
    // roomSeq 1 + depth takes the slot; roomSeq 1 is then gone for good.
    let later = UInt64(1 + FanoutBatchReference.depth)
    reference.record(roomSeq: later, payload: [5], after: BinaryCodecState())
    guard case .unusable = reference.find(roomSeq: 1, payload: [1, 2, 3]) else {
        Issue.record("a pushed-out roomSeq is unusable")
        return
    }
    reference.record(roomSeq: 1, payload: [1, 2, 3], after: state)
    guard case .match(let kept) = reference.find(roomSeq: later, payload: [5]) else {
        Issue.record("an older roomSeq never replaces a newer one")
        return
    }
    #expect(kept.lastAuthor == nil)
}

/// A batched socket: datagrams queued with `transmit` reach the server in order at `flush`,
/// and the server's answers come back to `onDatagram` at `drain`, byte for byte, each with
/// its kernel arrival time on the loop's clock (between sending and reading).
@Test func fanoutSocketSendsInOrderAndReceivesBatches() throws {
    let loop = try EventLoop()
    defer { loop.shutdown() }
    let server = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
    var atServer: [[UInt8]] = []
    var peer: SocketAddress?
    try server.startReceiving { buffer, sender in
        atServer.append(Array(buffer))
        peer = sender
    }
    var atClient: [[UInt8]] = []
    var arrivals: [UInt64] = []
    let client = try FanoutSocket(server: try server.localAddress, receiveBufferBytes: 1 << 20) { buffer, arrivedAt in
        atClient.append(Array(buffer))
        arrivals.append(arrivedAt)
    }
    defer { client.close() }
    let sent: [[UInt8]] = (0..<(FanoutSocket.sendBatch + 5)).map { i in [UInt8(i & 0xFF), UInt8(i >> 8), 42] }
    for d in sent { client.transmit(d) }
    client.flush()
    let deadline = loop.now + 2_000_000
    while atServer.count < sent.count && loop.now < deadline { loop.runOnce() }
    #expect(atServer == sent)
    let answers: [[UInt8]] = (0..<(FanoutSocket.receiveBatch + 3)).map { i in [UInt8(i & 0xFF), 7] }
    let beforeSending = loop.now
    if let peer {
        for a in answers { try server.send(a, to: peer) }
    }
    usleep(20_000)
    let readAt = loop.now
    client.drain(now: readAt)
    #expect(atClient == answers)
    // Stamped by the kernel, mapped onto the loop clock (1 ms of slack for the mapping).
    #expect(arrivals.allSatisfy { $0 + 1000 >= beforeSending && $0 <= readAt })
    // Not asserted: that every stamp is earlier than the read. About one run in four, some
    // datagrams come back stamped at the read itself (`drain` clamps a stamp to `now`), so the
    // generator then counts up to one 1 ms tick of its own reading as relay latency.
    #expect(client.sendFailures == 0)
    #expect(client.truncated == 0)
    // glibc's struct mmsghdr on 64-bit Linux: a 56-byte msghdr and the length, padded.
    #expect(MemoryLayout<MultiMessage>.stride == 64)
}
