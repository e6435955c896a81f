import InkProtocol

/// Encodes the relay's messages for native sessions within one drain of the relay's outputs,
/// coding a `roomBatch` once for the members it fans out to.
///
/// The relay sends a new room batch to every member of the room in a row, and members in the
/// same codec state get the same payload (one array: `SharedBatchEncoder`), so their message
/// bytes are the same too. They get the same array (copy-on-write shared storage): one
/// encoding, and every member's send queue and sent ledger hold the same buffer.
struct SharedMessageEncoder {
    private var lastBatch: RoomBatch?
    private var lastBytes: [UInt8] = []

    /// `SessionMessageCodec.encode(message)`, shared with the previous call when both are the
    /// same room batch.
    mutating func encode(_ message: ServerMessage) -> [UInt8] {
        guard case .roomBatch(let batch) = message else { return SessionMessageCodec.encode(message) }
        // Payloads sharing one array compare in constant time; another room's batch differs
        // at once in its sequence number or author.
        if let lastBatch, lastBatch == batch { return lastBytes }
        let bytes = SessionMessageCodec.encode(message)
        lastBatch = batch
        lastBytes = bytes
        return bytes
    }
}
