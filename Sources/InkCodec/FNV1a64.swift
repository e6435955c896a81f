/// FNV-1a, 64 bit: a small, stable, portable hash for digests that must agree across devices
/// and runs (Swift's `Hasher` is seeded per process, so it cannot be used for this).
public struct FNV1a64: Sendable {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    public static let prime: UInt64 = 0x0000_0100_0000_01b3

    public private(set) var value: UInt64 = FNV1a64.offsetBasis

    public init() {}

    public mutating func add(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* FNV1a64.prime
    }

    public mutating func add(_ bytes: some Sequence<UInt8>) {
        for b in bytes { add(b) }
    }

    /// Little-endian, fixed width.
    public mutating func add(_ v: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { add(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }

    public mutating func add(_ v: Int32) { add(UInt32(bitPattern: v)) }

    public mutating func add(_ v: Bool) { add(v ? UInt8(1) : 0) }
}
