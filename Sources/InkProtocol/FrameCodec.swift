/// Encodes and decodes `Frame`s (docs/protocol.md 4.7): what a sealed transport packet
/// carries. Big-endian fixed integers, LEB128 varints; no checksum and no connection id (the
/// packet's tag and header have them).
public enum FrameCodec {
    /// Largest frame accepted or produced: a sealed packet of it is `PacketCodec.maxDatagramBytes`.
    public static let maxFrameBytes = 1443
    /// Smallest valid frame: flags and timestamp.
    public static let minFrameBytes = 5
    /// Most selective-ack ranges one frame may carry.
    public static let maxAckRanges = 32
    /// Most segments one frame may carry.
    public static let maxSegmentsPerFrame = 128
    /// Largest extension block (sum of its TLVs).
    public static let maxExtensionBytes = 256
    /// Unit of `AckBlock.ackDelay`.
    public static let ackDelayUnitMicroseconds: UInt64 = 8

    static let flagAck: UInt8 = 0x01
    static let flagAckRanges: UInt8 = 0x02
    static let flagExtensions: UInt8 = 0x04
    static let flagAckNow: UInt8 = 0x08
    static let flagClose: UInt8 = 0x10

    /// Worst-case bytes a segment of `payloadCount` bytes adds to a frame.
    public static func segmentOverhead(payloadCount: Int) -> Int {
        5 + ByteWriter.varintSize(UInt64(payloadCount) << 1 | 1)
    }

    /// `encode(frame).count`, without building the bytes (a sender sizing a datagram).
    public static func encodedSize(of frame: Frame) -> Int {
        var n = 1 + 4
        if let ack = frame.ack {
            n += ByteWriter.varintSize(UInt64(ack.cumulative.rawValue)) + 4
            n += ByteWriter.varintSize(UInt64(ack.ackDelay)) + ByteWriter.varintSize(UInt64(ack.window))
            if !ack.ranges.isEmpty {
                n += 1
                var previousEnd = ack.cumulative
                for r in ack.ranges {
                    n += ByteWriter.varintSize(UInt64(UInt32(bitPattern: previousEnd.distance(to: r.start)) &- 1))
                    n += ByteWriter.varintSize(UInt64(r.count &- 1))
                    previousEnd = r.end
                }
            }
        }
        if !frame.extensions.isEmpty {
            var e = 0
            for x in frame.extensions { e += ByteWriter.varintSize(x.type) + ByteWriter.varintSize(UInt64(x.value.count)) + x.value.count }
            n += ByteWriter.varintSize(UInt64(e)) + e
        }
        var previous: SequenceNumber?
        for s in frame.segments {
            if let p = previous {
                n += ByteWriter.varintSize(UInt64(UInt32(bitPattern: p.distance(to: s.sequence))))
            } else {
                n += ByteWriter.varintSize(UInt64(s.sequence.rawValue))
            }
            previous = s.sequence
            n += ByteWriter.varintSize(UInt64(s.payload.count) << 1 | (s.endOfMessage ? 1 : 0)) + s.payload.count
        }
        return n
    }

    public static func encode(_ frame: Frame) -> [UInt8] { encode(frame, headroom: 0, tailroom: 0) }

    /// The frame's bytes after `headroom` zero bytes, with capacity for `tailroom` more: a
    /// sealer writes its header in front and its tag behind without copying the frame.
    public static func encode(_ frame: Frame, headroom: Int, tailroom: Int) -> [UInt8] {
        var w = ByteWriter(capacity: headroom + tailroom + 64 + frame.segments.reduce(0) { $0 + $1.payload.count + 4 })
        if headroom > 0 { w.bytes.append(contentsOf: repeatElement(0, count: headroom)) }
        var flags: UInt8 = 0
        if frame.kind == .close { flags |= flagClose }
        if frame.ack != nil { flags |= flagAck }
        if let ack = frame.ack, !ack.ranges.isEmpty { flags |= flagAckRanges }
        if !frame.extensions.isEmpty { flags |= flagExtensions }
        if frame.ackNow { flags |= flagAckNow }
        w.writeU8(flags)
        w.writeU32(frame.timestamp)
        if let ack = frame.ack {
            w.writeVarint(UInt64(ack.cumulative.rawValue))
            w.writeU32(ack.echoedTimestamp)
            w.writeVarint(UInt64(ack.ackDelay))
            w.writeVarint(UInt64(ack.window))
            if !ack.ranges.isEmpty {
                w.writeU8(UInt8(ack.ranges.count))
                var previousEnd = ack.cumulative
                for r in ack.ranges {
                    // gap >= 1 missing numbers precede every range; both written minus one.
                    w.writeVarint(UInt64(UInt32(bitPattern: previousEnd.distance(to: r.start)) &- 1))
                    w.writeVarint(UInt64(r.count &- 1))
                    previousEnd = r.end
                }
            }
        }
        if !frame.extensions.isEmpty {
            var e = ByteWriter()
            for x in frame.extensions {
                e.writeVarint(x.type)
                e.writeVarint(UInt64(x.value.count))
                e.writeBytes(x.value)
            }
            w.writeVarint(UInt64(e.bytes.count))
            w.writeBytes(e.bytes)
        }
        var previous: SequenceNumber?
        for s in frame.segments {
            if let p = previous {
                w.writeVarint(UInt64(UInt32(bitPattern: p.distance(to: s.sequence))))
            } else {
                w.writeVarint(UInt64(s.sequence.rawValue))
            }
            previous = s.sequence
            w.writeVarint(UInt64(s.payload.count) << 1 | (s.endOfMessage ? 1 : 0))
            w.writeBytes(s.payload)
        }
        return w.bytes
    }

    public static func decode(_ datagram: [UInt8]) throws(FrameError) -> Frame {
        let result = datagram.withUnsafeBytes { raw -> Result<Frame, FrameError> in
            do throws(FrameError) { return .success(try decode(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Decodes borrowed memory (an opened packet's plaintext) without copying it: a frame of
    /// acknowledgements alone allocates nothing; only segment payloads and extension values
    /// (which outlive the call) are copied out.
    public static func decode(_ datagram: UnsafeRawBufferPointer) throws(FrameError) -> Frame {
        guard datagram.count <= maxFrameBytes else { throw .tooLarge(datagram.count) }
        guard datagram.count >= minFrameBytes else { throw .truncated }
        var r = ByteReader(datagram, end: datagram.count)
        // Bits 5...7 are reserved: senders write zero, receivers ignore them.
        let flags = try r.readU8()
        let timestamp = try r.readU32()
        if flags & flagClose != 0 {
            guard flags & 0x0F == 0, r.remaining == 0 else { throw .closeWithBody }
            return Frame(kind: .close, timestamp: timestamp)
        }
        var frame = Frame(kind: .data, timestamp: timestamp, ackNow: flags & flagAckNow != 0)

        if flags & flagAck != 0 {
            let cumulative = SequenceNumber(try r.readVarint32())
            let echo = try r.readU32()
            let delay = try r.readVarint32()
            let window = try r.readVarint32()
            var ack = AckBlock(cumulative: cumulative, echoedTimestamp: echo, ackDelay: delay, window: window)
            if flags & flagAckRanges != 0 {
                let count = Int(try r.readU8())
                guard count > 0 else { throw .zeroAckRangeCount }
                guard count <= maxAckRanges else { throw .tooManyAckRanges(count) }
                // Offsets from the cumulative ack, kept in 64 bits so nothing wraps; every
                // range must end within half the sequence space above it.
                var offset: UInt64 = 0
                ack.ranges.reserveCapacity(count)
                for _ in 0..<count {
                    let gap = UInt64(try r.readVarint32()) + 1
                    let length = UInt64(try r.readVarint32()) + 1
                    let start = offset + gap
                    offset = start + length
                    guard offset <= 1 << 31 else { throw .invalidAckRange }
                    ack.ranges.append(SequenceRange(start: cumulative.advanced(by: UInt32(start)), count: UInt32(length)))
                }
            }
            frame.ack = ack
        } else if flags & flagAckRanges != 0 {
            throw .ackRangesWithoutAck
        }

        if flags & flagExtensions != 0 {
            let total = try r.readVarint()
            guard total <= UInt64(maxExtensionBytes) else { throw .extensionTooLarge(Int(clamping: total)) }
            guard Int(total) <= r.remaining else { throw .truncated }
            var e = ByteReader(datagram, end: r.index + Int(total))
            e.index = r.index
            while e.remaining > 0 {
                let type = try e.readVarint()
                let length = try e.readVarint()
                guard length <= UInt64(e.remaining) else { throw .malformedExtension }
                frame.extensions.append(FrameExtension(type: type, value: try e.readBytes(Int(length))))
            }
            r.index = e.index
        }

        var previous: SequenceNumber?
        while r.remaining > 0 {
            guard frame.segments.count < maxSegmentsPerFrame else { throw .tooManySegments }
            let raw = try r.readVarint32()
            let sequence: SequenceNumber
            if let p = previous {
                guard raw != 0, raw < 1 << 31 else { throw .nonIncreasingSegment }
                sequence = p.advanced(by: raw)
            } else {
                sequence = SequenceNumber(raw)
            }
            previous = sequence
            let lengthAndEnd = try r.readVarint()
            let length = lengthAndEnd >> 1
            guard length <= UInt64(r.remaining) else {
                throw length > UInt64(maxFrameBytes) ? .segmentTooLarge(Int(clamping: length)) : .truncated
            }
            let payload = try r.readBytes(Int(length))
            frame.segments.append(Segment(sequence: sequence, endOfMessage: lengthAndEnd & 1 != 0, payload: payload))
        }
        return frame
    }
}
