/// The answer a protocol 2 daemon gives a protocol 1 (unsealed) device (docs/protocol.md 8.1,
/// 8.2): a `joinRefused(unsupportedVersion)` in the framing that device reads, so it shows a
/// refused join with the reason instead of waiting for an answer that never comes.
public enum ProtocolOneRefusal {
    public static let text = "inkwired needs protocol 2 (sealed sessions): update this device's Inkwire client"

    /// The refusal as a session message (protocol 1's messages are this version's).
    public static var message: [UInt8] { SessionMessageCodec.encode(.joinRefused(.unsupportedVersion, text: text)) }

    /// The stream answer: one length-prefixed message.
    public static var streamBytes: [UInt8] { StreamFrameDecoder.frame(message) }

    /// The protocol 1 datagram answering `datagram` (which `PacketCodec.isProtocolOne`
    /// accepted): `10 01 cid ts ack(cumulative, their timestamp, 0, 0) segment(0, end, refusal)
    /// crc`, stamped `timestamp`. Nil when the frame inside is not a data frame.
    public static func datagram(answering datagram: [UInt8], timestamp: UInt32) -> [UInt8]? {
        guard datagram.count >= 11, datagram[0] == 0x10 else { return nil }
        let body = datagram.withUnsafeBytes { raw -> (UInt64, Frame)? in
            var r = ByteReader(raw, end: raw.count - 4)
            r.index = 2
            guard let cid = try? r.readVarint() else { return nil }
            // After the connection id, a protocol 1 frame is a protocol 2 frame's layout.
            var inner: [UInt8] = [raw[1] & 0x0F]
            inner.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[r.index..<(raw.count - 4)]))
            guard let frame = try? FrameCodec.decode(inner) else { return nil }
            return (cid, frame)
        }
        guard let (cid, theirs) = body else { return nil }
        let carriesJoin = theirs.segments.first?.sequence == SequenceNumber(0)
        var w = ByteWriter(capacity: 160)
        w.writeU8(0x10)
        w.writeU8(FrameCodec.flagAck)
        w.writeVarint(cid)
        w.writeU32(timestamp)
        w.writeVarint(carriesJoin ? 1 : 0)
        w.writeU32(theirs.timestamp)
        w.writeVarint(0)
        w.writeVarint(0)
        let refusal = message
        w.writeVarint(0)
        w.writeVarint(UInt64(refusal.count) << 1 | 1)
        w.writeBytes(refusal)
        w.writeU32(CRC32C.checksum(w.bytes))
        return w.bytes
    }
}
