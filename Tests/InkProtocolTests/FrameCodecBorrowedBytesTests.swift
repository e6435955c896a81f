import Testing
@testable import InkProtocol

/// Decoding borrowed memory (how the daemon reads a datagram in the socket's buffer) sees
/// exactly the bytes lent, never the memory around them.
@Suite struct FrameCodecBorrowedBytesTests {
    static let frame = Frame(timestamp: 77, ackNow: true,
                             ack: AckBlock(cumulative: SequenceNumber(5), echoedTimestamp: 9, ackDelay: 2, window: 64,
                                           ranges: [SequenceRange(start: SequenceNumber(8), count: 3)]),
                             extensions: [FrameExtension(type: 1, value: [4, 5])],
                             segments: [Segment(sequence: SequenceNumber(20), endOfMessage: true, payload: [1, 2, 3])])

    /// `bytes` lent from the middle of a larger buffer whose other bytes are all 0xFF.
    static func lent<R>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let padded = [UInt8](repeating: 0xFF, count: 7) + bytes + [UInt8](repeating: 0xFF, count: 9)
        return padded.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[7..<7 + bytes.count])) }
    }

    static func decodeLent(_ bytes: [UInt8]) -> Result<Frame, FrameError> {
        lent(bytes) { raw in
            do throws(FrameError) { return .success(try FrameCodec.decode(raw)) } catch { return .failure(error) }
        }
    }

    @Test func lentBytesDecodeLikeAnArray() throws {
        let bytes = FrameCodec.encode(Self.frame)
        #expect(try Self.decodeLent(bytes).get() == Self.frame)
        #expect(CRC32C.checksum(bytes) == bytes.withUnsafeBytes { CRC32C.checksum($0) })
    }

    @Test func everyTruncationOfLentBytesDecodesLikeTheArray() {
        let bytes = FrameCodec.encode(Self.frame)
        for n in 0..<bytes.count {
            let prefix = Array(bytes[0..<n])
            let byArray: Result<Frame, FrameError>
            do { byArray = .success(try FrameCodec.decode(prefix)) } catch { byArray = .failure(error) }
            #expect(Self.decodeLent(prefix) == byArray, "prefix of \(n) bytes")
        }
    }

    @Test func arqTakesLentBytesLikeAnArray() {
        let sender = ARQSession(configuration: ARQConfiguration(), now: .zero)
        let byArray = ARQSession(configuration: ARQConfiguration(), now: .zero)
        let byLent = ARQSession(configuration: ARQConfiguration(), now: .zero)
        try? sender.send([10, 20, 30])
        let now = Instant(microseconds: 1000)
        while let d = sender.pollTransmit(now: now) {
            byArray.handleDatagram(d, now: now)
            Self.lent(d) { byLent.handleDatagram($0, now: now) }
        }
        #expect(byArray.pollEvent() == .delivered([10, 20, 30]))
        #expect(byLent.pollEvent() == .delivered([10, 20, 30]))
        #expect(byArray.pollTransmit(now: now) == byLent.pollTransmit(now: now))
    }
}
