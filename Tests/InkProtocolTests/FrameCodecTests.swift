import Testing
@testable import InkProtocol

@Suite struct FrameCodecTests {
    @Test func randomFramesRoundTrip() throws {
        var rng = TestRandom(seed: 11)
        for _ in 0..<2000 {
            var f = Frame(kind: rng.next(5) == 0 ? .close : .data, connectionID: rng.next(2) == 0 ? rng.next(100) : rng.state,
                          timestamp: UInt32(truncatingIfNeeded: rng.state >> 7), ackNow: rng.next(2) == 0)
            if rng.next(3) > 0 {
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
            for _ in 0..<rng.next(3) {
                f.extensions.append(FrameExtension(type: rng.next(1000), value: (0..<rng.next(10)).map { _ in UInt8(rng.next(256)) }))
            }
            var seq = SequenceNumber(UInt32(truncatingIfNeeded: rng.state >> 5))
            for _ in 0..<rng.next(8) {
                f.segments.append(Segment(sequence: seq, endOfMessage: rng.next(2) == 0, payload: (0..<rng.next(60)).map { _ in UInt8(rng.next(256)) }))
                seq = seq.advanced(by: UInt32(1 + rng.next(3)))
            }
            let bytes = FrameCodec.encode(f)
            #expect(try FrameCodec.decode(bytes) == f)
            #expect(FrameCodec.connectionID(of: bytes) == f.connectionID)
        }
    }

    @Test func everyTruncationAndBitFlipIsATypedError() {
        let f = Frame(connectionID: 42, timestamp: 1234,
                      ack: AckBlock(cumulative: SequenceNumber(10), echoedTimestamp: 99, ackDelay: 3, window: 256,
                                    ranges: [SequenceRange(start: SequenceNumber(12), count: 2)]),
                      segments: [Segment(sequence: SequenceNumber(7), endOfMessage: true, payload: [1, 2, 3])])
        let bytes = FrameCodec.encode(f)
        for n in 0..<bytes.count {
            #expect(throws: FrameError.self) { try FrameCodec.decode(Array(bytes[0..<n])) }
        }
        for i in 0..<bytes.count {
            for bit in 0..<8 {
                var b = bytes
                b[i] ^= 1 << UInt8(bit)
                // CRC-32C detects every single-bit error.
                #expect(throws: FrameError.badChecksum) { try FrameCodec.decode(b) }
            }
        }
        #expect(throws: FrameError.tooLarge(FrameCodec.maxFrameBytes + 1)) {
            try FrameCodec.decode([UInt8](repeating: 0, count: FrameCodec.maxFrameBytes + 1))
        }
    }

    @Test func arbitraryBytesNeverTrap() {
        var rng = TestRandom(seed: 5)
        let seed = FrameCodec.encode(Frame(connectionID: 3, timestamp: 9, segments: [Segment(sequence: SequenceNumber(1), endOfMessage: true, payload: [9, 9])]))
        for _ in 0..<20_000 {
            var b = seed
            for _ in 0..<(1 + rng.next(4)) {
                switch rng.next(3) {
                case 0: b[Int(rng.next(UInt64(b.count)))] = UInt8(rng.next(256))
                case 1: b.insert(UInt8(rng.next(256)), at: Int(rng.next(UInt64(b.count))))
                default: if b.count > 1 { b.remove(at: Int(rng.next(UInt64(b.count)))) }
                }
            }
            // Repair the checksum half the time so the parser behind it is exercised.
            if rng.next(2) == 0 && b.count >= 4 {
                let crc = CRC32C.checksum(b.dropLast(4))
                b.replaceSubrange(b.count - 4..<b.count, with: [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
            }
            _ = try? FrameCodec.decode(b)
        }
    }
}
