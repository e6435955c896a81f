// A file (or any byte stream) of compact binary batches: what `inkwire codec --to binary`
// writes and storage can append to. Transports do not use it: they carry one batch per payload.

/// `"IKB1"`, then per batch its length as an unsigned LEB128 varint and its bytes. The batches
/// are coded in order against one `BinaryCodecState` (docs/protocol.md section 2.6).
public enum BinaryBatchStream {
    public static let magic: [UInt8] = [0x49, 0x4B, 0x42, 0x31]

    public enum Error: Swift.Error, Hashable, Sendable {
        case badMagic
        /// A length field that is cut off, longer than 5 bytes, zero or above the batch bound.
        case badLength(offset: Int)
        /// The stream ends inside a batch.
        case truncated(offset: Int)
        /// Batch number `index` (from 0) does not decode.
        case batch(index: Int, BinaryCodecError)
    }

    public static func encode(_ batches: [Batch]) throws(BinaryCodecError) -> [UInt8] {
        var out = magic
        var state = BinaryCodecState()
        var encoder = BinaryBatchEncoder()
        var bytes: [UInt8] = []
        for batch in batches {
            bytes.removeAll(keepingCapacity: true)
            try encoder.encode(batch, state: &state, into: &bytes)
            var n = UInt64(bytes.count)
            while n >= 0x80 {
                out.append(UInt8(n & 0x7F) | 0x80)
                n >>= 7
            }
            out.append(UInt8(n))
            out += bytes
        }
        return out
    }

    public static func decode(_ stream: [UInt8]) throws(Error) -> [Batch] {
        guard stream.count >= magic.count, Array(stream[0..<magic.count]) == magic else { throw .badMagic }
        var batches: [Batch] = []
        var state = BinaryCodecState()
        var i = magic.count
        while i < stream.count {
            let start = i
            var length = 0
            var shift = 0
            while true {
                guard i < stream.count, shift <= 28 else { throw .badLength(offset: start) }
                let b = stream[i]
                i += 1
                length |= Int(b & 0x7F) << shift
                shift += 7
                if b & 0x80 == 0 { break }
            }
            guard length > 0, length <= BinaryBatchCodec.maxBatchBytes else { throw .badLength(offset: start) }
            guard stream.count - i >= length else { throw .truncated(offset: start) }
            do {
                batches.append(try BinaryBatchCodec.decode(Array(stream[i..<(i + length)]), state: &state))
            } catch {
                throw .batch(index: batches.count, error)
            }
            i += length
        }
        return batches
    }
}
