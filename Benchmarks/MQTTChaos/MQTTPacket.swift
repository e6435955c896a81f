/// The control packet types (the high nibble of the first byte).
public enum MQTTPacketType: UInt8, Sendable {
    case connect = 1, connack, publish, puback, pubrec, pubrel, pubcomp
    case subscribe, suback, unsubscribe, unsuback, pingreq, pingresp, disconnect
    /// MQTT 5 only.
    case auth
}

/// One whole control packet as it was on the wire (fixed header included), with readers for
/// the few fields the chaos proxy needs. Readers return nil when the packet is too short for
/// the field: the proxy forwards what it cannot read untouched.
public struct MQTTPacket: Equatable, Sendable {
    /// The packet's bytes, first byte to last.
    public private(set) var bytes: [UInt8]
    public let type: MQTTPacketType
    /// Fixed header length: one type byte plus the remaining-length bytes.
    public let headerBytes: Int

    /// Checks the first byte; `bytes` must be one whole packet whose remaining length starts at
    /// index 1 (the framer's output).
    init(bytes: [UInt8], headerBytes: Int) throws(MQTTFramingError) {
        guard let type = MQTTPacketType(rawValue: bytes[0] >> 4) else { throw .reservedPacketType }
        if type == .publish, (bytes[0] >> 1) & 0x3 == 3 { throw .invalidQoS }
        self.bytes = bytes
        self.type = type
        self.headerBytes = headerBytes
    }

    /// The four flag bits of the fixed header.
    public var flags: UInt8 { bytes[0] & 0x0F }

    /// The bytes after the fixed header.
    public var body: ArraySlice<UInt8> { bytes[headerBytes...] }

    // MARK: PUBLISH

    /// 0, 1 or 2 for a PUBLISH, nil for other types.
    public var publishQoS: Int? { type == .publish ? Int((bytes[0] >> 1) & 0x3) : nil }

    /// The DUP flag of a PUBLISH (set on a resend).
    public var isDuplicate: Bool { type == .publish && bytes[0] & 0x08 != 0 }

    /// This PUBLISH marked as a resend. MQTT requires DUP 0 on QoS 0, so only QoS 1 and 2 get
    /// it; other packets come back unchanged.
    public func markedDuplicate() -> MQTTPacket {
        guard let qos = publishQoS, qos > 0 else { return self }
        var copy = self
        copy.bytes[0] |= 0x08
        return copy
    }

    /// The topic of a PUBLISH (raw UTF-8 bytes).
    public var publishTopic: ArraySlice<UInt8>? {
        guard type == .publish, let length = u16(at: headerBytes) else { return nil }
        let start = headerBytes + 2
        guard start + length <= bytes.count else { return nil }
        return bytes[start..<start + length]
    }

    /// The packet identifier: after the topic in a QoS 1/2 PUBLISH; first in PUBACK, PUBREC,
    /// PUBREL, PUBCOMP, SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK. Nil for others.
    public var packetIdentifier: UInt16? {
        switch type {
        case .publish:
            guard let qos = publishQoS, qos > 0, let topic = publishTopic else { return nil }
            return u16(at: topic.endIndex).map(UInt16.init)
        case .puback, .pubrec, .pubrel, .pubcomp, .subscribe, .suback, .unsubscribe, .unsuback:
            return u16(at: headerBytes).map(UInt16.init)
        case .connect, .connack, .pingreq, .pingresp, .disconnect, .auth:
            return nil
        }
    }

    /// The application payload of a PUBLISH. `protocolLevel` 5 skips the MQTT 5 properties.
    public func publishPayload(protocolLevel: UInt8 = 4) -> ArraySlice<UInt8>? {
        guard let qos = publishQoS, let topic = publishTopic else { return nil }
        var index = topic.endIndex + (qos > 0 ? 2 : 0)
        if protocolLevel >= 5 {
            guard case .value(let length, let count)? = try? MQTTRemainingLength.decode(bytes, from: index) else { return nil }
            index += count + length
        }
        guard index <= bytes.count else { return nil }
        return bytes[index...]
    }

    // MARK: CONNECT

    /// The protocol level of a CONNECT: 3 (MQTT 3.1), 4 (3.1.1) or 5.
    public var connectProtocolLevel: UInt8? {
        guard type == .connect, let nameLength = u16(at: headerBytes) else { return nil }
        let index = headerBytes + 2 + nameLength
        return index < bytes.count ? bytes[index] : nil
    }

    /// The client identifier of a CONNECT (raw UTF-8 bytes, possibly empty).
    public var connectClientIdentifier: ArraySlice<UInt8>? {
        guard let level = connectProtocolLevel, let nameLength = u16(at: headerBytes) else { return nil }
        // Protocol name, level, connect flags, keepalive.
        var index = headerBytes + 2 + nameLength + 1 + 1 + 2
        if level >= 5 {
            guard case .value(let length, let count)? = try? MQTTRemainingLength.decode(bytes, from: index) else { return nil }
            index += count + length
        }
        guard let idLength = u16(at: index), index + 2 + idLength <= bytes.count else { return nil }
        return bytes[index + 2..<index + 2 + idLength]
    }

    /// A big-endian 16-bit value at `index`, nil past the end.
    private func u16(at index: Int) -> Int? {
        guard index >= 0, index + 2 <= bytes.count else { return nil }
        return Int(bytes[index]) << 8 | Int(bytes[index + 1])
    }
}
