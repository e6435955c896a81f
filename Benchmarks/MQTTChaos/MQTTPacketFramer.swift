/// Cuts one direction of an MQTT byte stream into whole control packets (MQTT 3.1.1 and 5 use
/// the same framing). Sans-IO: feed bytes with `handleBytes`, take packets with `pollPacket`
/// until it returns nil. After a thrown error the stream is unusable (the proxy closes it).
///
/// Memory is bounded: a packet whose announced length passes `maximumPacketBytes` is refused as
/// soon as its header is read, so what stays buffered after `pollPacket` returns nil is at most
/// one partial packet (< `maximumPacketBytes`).
public struct MQTTPacketFramer: Sendable {
    /// Default bound on one packet: a 1 MiB payload (the bridge's own limit) plus headers.
    public static let defaultMaximumPacketBytes = (1 << 20) + 64 * 1024

    public let maximumPacketBytes: Int
    private var buffer: [UInt8] = []
    /// Start of the first unread byte in `buffer`.
    private var readIndex = 0
    private var failed: MQTTFramingError?

    public init(maximumPacketBytes: Int = MQTTPacketFramer.defaultMaximumPacketBytes) {
        self.maximumPacketBytes = max(2, min(maximumPacketBytes, 1 + MQTTRemainingLength.maximumEncodedBytes + MQTTRemainingLength.maximumValue))
    }

    /// Bytes received and not yet returned in a packet.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    public mutating func handleBytes(_ bytes: some Collection<UInt8>) {
        guard failed == nil else { return }
        compactIfWorthwhile()
        buffer.append(contentsOf: bytes)
    }

    public mutating func handleBytes(_ bytes: UnsafeRawBufferPointer) {
        guard failed == nil else { return }
        compactIfWorthwhile()
        buffer.append(contentsOf: bytes)
    }

    /// The next whole packet, nil when more bytes are needed. Throws the stream's framing error
    /// (again on every later call).
    public mutating func pollPacket() throws(MQTTFramingError) -> MQTTPacket? {
        if let failed { throw failed }
        guard readIndex < buffer.count else { return nil }
        do throws(MQTTFramingError) {
            guard case .value(let length, let lengthBytes) = try MQTTRemainingLength.decode(buffer, from: readIndex + 1) else {
                return nil
            }
            let headerBytes = 1 + lengthBytes
            let total = headerBytes + length
            guard total <= maximumPacketBytes else { throw .packetTooLarge(total) }
            guard buffer.count - readIndex >= total else { return nil }
            let packet = try MQTTPacket(bytes: Array(buffer[readIndex..<readIndex + total]), headerBytes: headerBytes)
            readIndex += total
            return packet
        } catch {
            failed = error
            throw error
        }
    }

    /// Drops consumed bytes once they are at least half the buffer, so appends stay amortised.
    private mutating func compactIfWorthwhile() {
        guard readIndex > 0 else { return }
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 4 * maximumPacketBytes)
            readIndex = 0
        } else if readIndex >= buffer.count / 2 {
            buffer.removeFirst(readIndex)
            readIndex = 0
        }
    }
}
