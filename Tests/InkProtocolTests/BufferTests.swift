import Testing
@testable import InkProtocol

@Suite struct BufferTests {
    private func segment(_ s: UInt32, _ end: Bool = true) -> Segment {
        Segment(sequence: SequenceNumber(s), endOfMessage: end, payload: [UInt8(truncatingIfNeeded: s)])
    }

    @Test func receiveWindowReleasesStrictlyInOrder() {
        var w = ReceiveWindow(capacity: 4, next: SequenceNumber(UInt32.max - 1))
        #expect(w.store(segment(0), window: 4) == .stored(gap: true))
        #expect(w.store(segment(0), window: 4) == .duplicate)
        #expect(w.store(segment(2), window: 4) == .outsideWindow)
        #expect(w.store(segment(1), window: 2) == .outsideWindow)
        #expect(w.outOfOrder.ranges == [SequenceRange(start: SequenceNumber(0), count: 1)])
        #expect(w.popInOrder() == nil)
        #expect(w.store(segment(UInt32.max - 1, false), window: 4) == .stored(gap: false))
        #expect(w.popInOrder()?.payload == [UInt8(truncatingIfNeeded: UInt32.max - 1)])
        #expect(w.popInOrder() == nil)
        #expect(w.store(segment(UInt32.max), window: 4) == .stored(gap: false))
        #expect(w.popInOrder()?.end == true)
        #expect(w.popInOrder()?.payload == [0])
        #expect(w.next == SequenceNumber(1))
        #expect(w.outOfOrder.isEmpty)
        #expect(w.bufferedBytes == 0)
        #expect(w.store(segment(UInt32.max), window: 4) == .duplicate)
    }

    @Test func receiveWindowRingGrowsWhenASegmentLandsBeyondIt() {
        let first = UInt32.max - 9
        var w = ReceiveWindow(capacity: 1024, next: SequenceNumber(first))
        // Move the ring's head off slot 0 first, across the wrap below.
        for s in 0..<5 {
            #expect(w.store(segment(first &+ UInt32(s)), window: 1024) == .stored(gap: false))
            #expect(w.popInOrder() != nil)
        }
        let base = first &+ 5
        #expect(w.store(segment(base &+ 700), window: 1024) == .stored(gap: true))
        #expect(w.store(segment(base &+ 1024), window: 1024) == .outsideWindow)
        #expect(w.store(segment(base &+ 700), window: 1024) == .duplicate)
        for d in 0..<700 { #expect(w.store(segment(base &+ UInt32(d)), window: 1024) == .stored(gap: d > 0)) }
        var released: [UInt8] = []
        while let piece = w.popInOrder() { released += piece.payload }
        #expect(released == (0...700).map { UInt8(truncatingIfNeeded: base &+ UInt32($0)) })
        #expect(w.next == SequenceNumber(base &+ 701))
        #expect(w.outOfOrder.isEmpty && w.bufferedBytes == 0)
    }

    @Test func sendQueueCutsMessagesIntoSegments() {
        var q = SendQueue()
        q.push([1, 2, 3, 4, 5])
        q.push([])
        q.push([6])
        #expect(q.queuedBytes == 6)
        #expect(q.nextSegmentSize(maxPayload: 2) == 2)
        var pieces: [String] = []
        while let p = q.popSegment(maxPayload: 2) { pieces.append("\(p.payload)\(p.endOfMessage ? "." : "")") }
        #expect(pieces == ["[1, 2]", "[3, 4]", "[5].", "[].", "[6]."])
        #expect(q.isEmpty && q.queuedBytes == 0)
    }

    @Test func sentLedgerPopsOnlyAContiguousAckedPrefix() {
        var l = SentLedger(base: SequenceNumber(UInt32.max))
        for i in 0..<4 { l.append(SentSegment(payload: [UInt8(i)], endOfMessage: true, lastSentAt: .zero, lastSentDatagram: UInt64(i))) }
        #expect(l.next == SequenceNumber(3))
        #expect(l.offset(of: SequenceNumber(1)) == 2)
        #expect(l.offset(of: SequenceNumber(3)) == nil)
        l[1].acked = true
        #expect(l.popAcked() == 0)
        l[0].acked = true
        #expect(l.popAcked() == 2)
        #expect(l.base == SequenceNumber(1))
        #expect(l.count == 2)
        #expect(l[0].payload == [2])
    }
}
