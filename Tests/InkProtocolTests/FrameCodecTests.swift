import Testing
@testable import InkProtocol

@Suite struct FrameCodecTests {
    @Test func randomFramesRoundTrip() throws {
        var rng = TestRandom(seed: 11)
        for _ in 0..<2000 {
            let close = rng.next(5) == 0
            var f = Frame(kind: close ? .close : .data, timestamp: UInt32(truncatingIfNeeded: rng.state >> 7), ackNow: !close && rng.next(2) == 0)
            if !close && rng.next(3) > 0 {
                let cumulative = SequenceNumber(UInt32(truncatingIfNeeded: rng.state >> 3))
                var ranges: [SequenceRange] = []
                var at = cumulative
                for _ in 0..<rng.next(6) {
                    at = at.advanced(by: UInt32(1 + rng.next(300)))
                    let r = SequenceRange(start: at, count: UInt32(1 + rng.next(40)))
                    ranges.append(r)
                    at = r.end
                }
                f.ack = AckBlock(cumulative: cumulative, echoedTimestamp: UInt32(truncatingIfNeeded: rng.state >> 11),
                                 ackDelay: UInt32(rng.next(100_000)), window: UInt32(rng.next(5000)), ranges: ranges)
            }
            for _ in 0..<(close ? 0 : rng.next(3)) {
                f.extensions.append(FrameExtension(type: rng.next(1000), value: (0..<rng.next(10)).map { _ in UInt8(rng.next(256)) }))
            }
            var seq = SequenceNumber(UInt32(truncatingIfNeeded: rng.state >> 5))
            for _ in 0..<(close ? 0 : rng.next(8)) {
                f.segments.append(Segment(sequence: seq, endOfMessage: rng.next(2) == 0, payload: (0..<rng.next(60)).map { _ in UInt8(rng.next(256)) }))
                seq = seq.advanced(by: UInt32(1 + rng.next(3)))
            }
            let bytes = FrameCodec.encode(f)
            #expect(try FrameCodec.decode(bytes) == f)
            #expect(FrameCodec.encodedSize(of: f) == bytes.count)
        }
    }

    /// The frame has no checksum (the packet's tag covers it): a damaged frame never reaches
    /// the decoder in a session. The decoder itself still never traps, never takes a truncated
    /// frame for the whole one, and reads only canonical bytes.
    @Test func truncationsAndBitFlipsNeverPassForTheFrame() {
        let f = Frame(timestamp: 1234,
                      ack: AckBlock(cumulative: SequenceNumber(10), echoedTimestamp: 99, ackDelay: 3, window: 256,
                                    ranges: [SequenceRange(start: SequenceNumber(12), count: 2)]),
                      segments: [Segment(sequence: SequenceNumber(7), endOfMessage: true, payload: [1, 2, 3])])
        let bytes = FrameCodec.encode(f)
        for n in 0..<bytes.count {
            #expect((try? FrameCodec.decode(Array(bytes[0..<n]))) != f)
        }
        for i in 0..<bytes.count {
            for bit in 0..<8 {
                var b = bytes
                b[i] ^= 1 << UInt8(bit)
                guard let g = try? FrameCodec.decode(b) else { continue }
                // A reserved flag bit is ignored; any other flip decodes to another frame.
                let reserved = i == 0 && bit >= 5
                #expect(reserved ? g == f : g != f)
                // Accepted bytes are canonical, but for the reserved flag bits.
                b[0] &= 0x1F
                #expect(FrameCodec.encode(g) == b)
            }
        }
        #expect(throws: FrameError.tooLarge(FrameCodec.maxFrameBytes + 1)) {
            try FrameCodec.decode([UInt8](repeating: 0, count: FrameCodec.maxFrameBytes + 1))
        }
    }

    @Test func arbitraryBytesNeverTrap() {
        var rng = TestRandom(seed: 5)
        let seed = FrameCodec.encode(Frame(timestamp: 9, segments: [Segment(sequence: SequenceNumber(1), endOfMessage: true, payload: [9, 9])]))
        for _ in 0..<20_000 {
            var b = seed
            for _ in 0..<(1 + rng.next(4)) {
                switch rng.next(3) {
                case 0: b[Int(rng.next(UInt64(b.count)))] = UInt8(rng.next(256))
                case 1: b.insert(UInt8(rng.next(256)), at: Int(rng.next(UInt64(b.count))))
                default: if b.count > 1 { b.remove(at: Int(rng.next(UInt64(b.count)))) }
                }
            }
            _ = try? FrameCodec.decode(b)
        }
    }
}
