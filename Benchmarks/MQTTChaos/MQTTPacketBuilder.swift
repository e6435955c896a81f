/// Encodes the few MQTT 3.1.1 packets a test client or a fuzz seed needs. Fields past their
/// protocol bounds (65,535-byte strings, the 268,435,455-byte remaining length) throw.
public enum MQTTPacketBuilder {
    /// A fixed header byte and `body`, framed.
    public static func packet(firstByte: UInt8, body: [UInt8]) throws(MQTTFramingError) -> [UInt8] {
        [firstByte] + (try MQTTRemainingLength.encode(body.count)) + body
    }

    /// CONNECT, protocol level 4, clean session.
    public static func connect(clientIdentifier: String, keepaliveSeconds: UInt16 = 30) throws(MQTTFramingError) -> [UInt8] {
        var body = try string(Array("MQTT".utf8))
        body += [4, 0x02, UInt8(keepaliveSeconds >> 8), UInt8(keepaliveSeconds & 0xFF)]
        body += try string(Array(clientIdentifier.utf8))
        return try packet(firstByte: MQTTPacketType.connect.rawValue << 4, body: body)
    }

    /// SUBSCRIBE to one topic filter at `qos`.
    public static func subscribe(packetIdentifier: UInt16, topicFilter: String, qos: UInt8) throws(MQTTFramingError) -> [UInt8] {
        let body = u16(packetIdentifier) + (try string(Array(topicFilter.utf8))) + [qos & 0x3]
        return try packet(firstByte: MQTTPacketType.subscribe.rawValue << 4 | 0x2, body: body)
    }

    /// PUBLISH; `packetIdentifier` is required for QoS 1 and 2 and ignored for QoS 0.
    public static func publish(topic: String, payload: [UInt8], qos: UInt8, packetIdentifier: UInt16 = 0,
                               duplicate: Bool = false, retain: Bool = false) throws(MQTTFramingError) -> [UInt8] {
        guard qos <= 2 else { throw .invalidQoS }
        var body = try string(Array(topic.utf8))
        if qos > 0 { body += u16(packetIdentifier) }
        body += payload
        let flags: UInt8 = (duplicate && qos > 0 ? 0x08 : 0) | qos << 1 | (retain ? 1 : 0)
        return try packet(firstByte: MQTTPacketType.publish.rawValue << 4 | flags, body: body)
    }

    /// PUBACK for `packetIdentifier`.
    public static func puback(packetIdentifier: UInt16) -> [UInt8] {
        [MQTTPacketType.puback.rawValue << 4, 2] + u16(packetIdentifier)
    }

    public static let pingreq: [UInt8] = [MQTTPacketType.pingreq.rawValue << 4, 0]
    public static let disconnect: [UInt8] = [MQTTPacketType.disconnect.rawValue << 4, 0]

    private static func u16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    private static func string(_ bytes: [UInt8]) throws(MQTTFramingError) -> [UInt8] {
        guard bytes.count <= Int(UInt16.max) else { throw .packetTooLarge(bytes.count) }
        return u16(UInt16(bytes.count)) + bytes
    }
}
