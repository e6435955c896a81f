/// MQTT's "remaining length": the byte count after the fixed header, 7 bits per byte, low
/// group first, the top bit saying another byte follows; at most four bytes (MQTT 3.1.1 2.2.3,
/// MQTT 5 1.5.5).
public enum MQTTRemainingLength {
    /// Longest encoding the protocol allows.
    public static let maximumEncodedBytes = 4
    /// Largest value four bytes carry (268,435,455).
    public static let maximumValue = (1 << 28) - 1

    public enum Decoded: Equatable, Sendable {
        /// The value and how many bytes encoded it.
        case value(Int, byteCount: Int)
        /// The input ends inside the encoding.
        case needMoreBytes
    }

    /// Reads the encoding starting at `start`; a fifth continuation byte is malformed.
    public static func decode(_ bytes: [UInt8], from start: Int) throws(MQTTFramingError) -> Decoded {
        var value = 0
        var index = start
        for shift in stride(from: 0, to: 7 * maximumEncodedBytes, by: 7) {
            guard index < bytes.count else { return .needMoreBytes }
            let byte = bytes[index]
            value |= Int(byte & 0x7F) << shift
            index += 1
            if byte & 0x80 == 0 { return .value(value, byteCount: index - start) }
        }
        throw .malformedRemainingLength
    }

    /// The encoding of `value` (0 ... `maximumValue`).
    public static func encode(_ value: Int) throws(MQTTFramingError) -> [UInt8] {
        guard value >= 0, value <= maximumValue else { throw .packetTooLarge(value) }
        var rest = value
        var out: [UInt8] = []
        repeat {
            var byte = UInt8(rest & 0x7F)
            rest >>= 7
            if rest > 0 { byte |= 0x80 }
            out.append(byte)
        } while rest > 0
        return out
    }
}

/// Why a byte stream is not MQTT; the proxy closes the connection on any of these.
public enum MQTTFramingError: Error, Equatable, Sendable {
    /// A remaining length with a continuation bit on its fourth byte.
    case malformedRemainingLength
    /// A packet longer than the framer's bound (or than the protocol allows), in bytes.
    case packetTooLarge(Int)
    /// Packet type 0 is reserved.
    case reservedPacketType
    /// PUBLISH with QoS bits 11.
    case invalidQoS
}
