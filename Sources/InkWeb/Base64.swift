// Base64 (RFC 4648 section 4, with padding): the WebSocket handshake's key and accept values.
// Encoding, not cryptography.

public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int(n >> UInt32(shift) & 63)]) }
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(rest == 2 ? alphabet[Int(n >> 6 & 63)] : 61)
            out.append(61)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nil unless `text` is canonical padded base64 (unused bits zero).
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < chars.count {
            var n: UInt32 = 0
            var pad = 0
            for k in 0..<4 {
                let c = chars[i + k]
                if c == 61 {
                    guard i + 4 == chars.count, k >= 2 else { return nil }
                    pad += 1
                    n <<= 6
                    continue
                }
                guard pad == 0, let v = value(c) else { return nil }
                n = n << 6 | UInt32(v)
            }
            out.append(UInt8(n >> 16 & 255))
            if pad < 2 { out.append(UInt8(n >> 8 & 255)) }
            if pad < 1 { out.append(UInt8(n & 255)) }
            if pad == 1 && n & 0xFF != 0 || pad == 2 && n & 0xFFFF != 0 { return nil }
            i += 4
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 65...90: c - 65
        case 97...122: c - 71
        case 48...57: c + 4
        case 43: 62
        case 47: 63
        default: nil
        }
    }
}
