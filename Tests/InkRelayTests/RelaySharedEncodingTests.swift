import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// A room where members join at different times (one while blocked, so it catches up over
/// older entries), three of them drawing in turn: every `roomBatch` payload a member gets must
/// be exactly the bytes of the old per-member encoding, that member's own codec state coding
/// each logged batch in the order it received them; members in step share one coding.
@Test func sharedFanOutSendsEveryMemberItsOwnEncodingsBytes() throws {
    let h = Harness()
    var devices: [Device] = []
    /// Every roomBatch each session got, in order.
    var received: [SessionID: [RoomBatch]] = [:]

    func settle() {
        var again = true
        while again {
            again = false
            for i in devices.indices {
                let got = h.take(devices[i].session)
                if got.isEmpty { continue }
                again = true
                received[devices[i].session, default: []] += roomBatches(got)
                for ack in devices[i].apply(got) { h.deliver(ack, from: devices[i].session) }
            }
        }
    }
    func join(_ id: UInt64, _ user: String, _ role: MemberRole) -> Int {
        var d = Device(h.open(id), origin: 100 + id, user: user, role: role)
        h.deliver(d.join(), from: d.session)
        devices.append(d)
        settle()
        return devices.count - 1
    }
    func draw(_ i: Int, points: Int, x: Int32) {
        let (message, _) = devices[i].stroke(points: points, x: x)
        h.deliver(message, from: devices[i].session)
        settle()
    }

    let teacher = join(1, "teacher", .teacher)
    let pia = join(2, "pia", .presenter)
    _ = join(3, "vic", .viewer)
    draw(teacher, points: 5, x: 0)
    draw(pia, points: 4, x: 40)
    draw(teacher, points: 2, x: 9)
    let paul = join(4, "paul", .presenter)
    _ = join(5, "val", .viewer)
    draw(teacher, points: 6, x: 70)
    draw(paul, points: 3, x: -20)
    // A member that joins blocked, then catches up over entries already coded for the others.
    var late = Device(h.open(6), origin: 106, user: "lea", role: .viewer)
    h.deliver(late.join(), from: late.session)
    devices.append(late)
    settle()
    h.block(late.session)
    draw(pia, points: 7, x: 300)
    draw(teacher, points: 4, x: 12)
    h.ready(late.session)
    settle()
    for round in 0..<6 {
        draw(teacher, points: 3 + round, x: Int32(round) * 11)
        draw(round % 2 == 0 ? pia : paul, points: 4, x: Int32(round) * -7)
    }
    draw(teacher, points: 5, x: 1)
    draw(teacher, points: 5, x: 2)
    // Everyone is in step with the teacher now: one coding for all five receivers.
    #expect(h.relay.rooms["r"]!.liveEncoder.codings == 1)

    // The reference: each member's own state codes the logged batches it got, in order.
    var logged: [UInt64: Batch] = [:]
    for record in h.appended {
        var fresh = BinaryCodecState()
        logged[record.roomSeq] = Batch(author: record.author, commands: try BinaryBatchCodec.decode(record.payload, state: &fresh).commands)
    }
    var compared = 0
    for d in devices {
        var state = BinaryCodecState()
        for rb in received[d.session] ?? [] {
            let batch = try #require(logged[rb.roomSeq])
            let expected = try BinaryBatchCodec.encode(batch, state: &state)
            #expect(rb.payload == expected, "session \(d.session.rawValue) roomSeq \(rb.roomSeq)")
            compared += 1
        }
    }
    #expect(compared > 60)
    // Nobody missed or repeated a batch (their own skipped).
    for d in devices {
        #expect(h.relay.cursor(d.session) == h.relay.roomHead("r"))
    }
}
