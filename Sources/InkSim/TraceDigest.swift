/// A running FNV-1a (64-bit) digest of everything a run does, so two runs of one seed can be
/// compared with a single number: same seed, same digest.
public struct TraceDigest: Sendable, Equatable, CustomStringConvertible {
    public private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    public init() {}

    public mutating func mix(_ x: UInt64) {
        var v = x
        for _ in 0 ..< 8 {
            value = (value ^ (v & 0xFF)) &* 0x0000_0100_0000_01B3
            v >>= 8
        }
    }

    public mutating func mix(_ bytes: [UInt8]) {
        mix(UInt64(bytes.count))
        for b in bytes { value = (value ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
    }

    public var description: String {
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
