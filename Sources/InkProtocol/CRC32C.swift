/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, SCTP and ext4.
///
/// Table-driven, slicing by eight bytes at a time. It detects corruption; it authenticates
/// nothing. Check value: `CRC32C.checksum("123456789")` is 0xE3069283.
public enum CRC32C {
    /// Reflected Castagnoli polynomial.
    public static let polynomial: UInt32 = 0x82F6_3B78

    /// Eight 256-entry tables: table k advances a byte that sits k positions further back.
    static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ polynomial : c >> 1 }
            t[n] = c
        }
        for n in 0..<256 {
            var c = t[n]
            for k in 1..<8 {
                c = t[Int(c & 0xFF)] ^ (c >> 8)
                t[k * 256 + n] = c
            }
        }
        return t
    }()

    /// Continues a running CRC (start with 0) over `bytes`.
    public static func update<C: Collection>(_ crc: UInt32, _ bytes: C) -> UInt32 where C.Element == UInt8 {
        if let done = bytes.withContiguousStorageIfAvailable({ update(crc, buffer: $0) }) { return done }
        return Array(bytes).withUnsafeBufferPointer { update(crc, buffer: $0) }
    }

    /// The CRC-32C of borrowed memory (a received datagram), without copying it.
    public static func checksum(_ raw: UnsafeRawBufferPointer) -> UInt32 {
        raw.withMemoryRebound(to: UInt8.self) { update(0, buffer: $0) }
    }

    private static func update(_ crc: UInt32, buffer: UnsafeBufferPointer<UInt8>) -> UInt32 {
        var c = ~crc
        var i = 0
        let n = buffer.count
        tables.withUnsafeBufferPointer { t in
            while n - i >= 8 {
                let lo = c ^ (UInt32(buffer[i]) | UInt32(buffer[i + 1]) << 8 | UInt32(buffer[i + 2]) << 16 | UInt32(buffer[i + 3]) << 24)
                let hi = UInt32(buffer[i + 4]) | UInt32(buffer[i + 5]) << 8 | UInt32(buffer[i + 6]) << 16 | UInt32(buffer[i + 7]) << 24
                c = t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
                i += 8
            }
            while i < n {
                c = t[Int((c ^ UInt32(buffer[i])) & 0xFF)] ^ (c >> 8)
                i += 1
            }
        }
        return ~c
    }

    /// The CRC-32C of `bytes`.
    public static func checksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        update(0, bytes)
    }
}
