// The cryptographic primitives a sealed session needs (docs/protocol.md 4.2), as an interface:
// the pure core runs the Noise state machine and the packet protection over it, and never
// implements a primitive itself. The daemon and `inkwire` inject `InkCrypto.OpenSSLCrypto`
// (libcrypto); tests pin keys through it, and the simulator injects `FakeCrypto`.

/// X25519, AES-256-GCM, SHA-256, HMAC-SHA256, HKDF-SHA256 and a random source.
public protocol SessionCrypto: AnyObject, Sendable {
    /// `count` bytes from a cryptographically secure source (ephemeral keys). A fake may make
    /// them deterministic; the protocol never depends on how.
    func randomBytes(_ count: Int) -> [UInt8]
    /// The X25519 public key of a 32-byte private key (RFC 7748; the key is clamped as usual).
    func x25519PublicKey(privateKey: [UInt8]) -> [UInt8]
    /// X25519(privateKey, publicKey), 32 bytes; nil when either key is not 32 bytes or the
    /// result is all zeros (a low-order public key).
    func x25519(privateKey: [UInt8], publicKey: [UInt8]) -> [UInt8]?
    func sha256(_ data: [UInt8]) -> [UInt8]
    func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8]
    /// HKDF-SHA256 (RFC 5869): extract with `salt`, expand with `info` to `count` bytes.
    func hkdfSHA256(salt: [UInt8], ikm: [UInt8], info: [UInt8], count: Int) -> [UInt8]
    /// An AES-256-GCM context for one 32-byte key, set up once and kept for the key's life.
    func aead(key: [UInt8]) -> any PacketAEAD
}

/// AES-256-GCM with one key. The nonce is Noise's: 4 zero bytes, then `nonce` as u64
/// big-endian. Not thread-safe: one per session direction and key phase.
public protocol PacketAEAD: AnyObject {
    /// Writes the ciphertext of `plaintext` and its 16-byte tag to `output`, which must hold
    /// `plaintext.count + 16` bytes and may start where `plaintext` does (in place).
    func seal(nonce: UInt64, ad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer)
    /// Writes the plaintext of `ciphertext` (which ends with its tag) to `output` (at least
    /// `ciphertext.count - 16` bytes; may start where `ciphertext` does). False when the tag
    /// does not match: `output` then holds nothing to use.
    func open(nonce: UInt64, ad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) -> Bool
}

extension PacketAEAD {
    /// `seal` of arrays: ciphertext || tag.
    public func seal(nonce: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + SessionCryptoSizes.tagBytes)
        ad.withUnsafeBytes { a in
            plaintext.withUnsafeBytes { p in
                out.withUnsafeMutableBytes { o in seal(nonce: nonce, ad: a, plaintext: p, output: o) }
            }
        }
        return out
    }

    /// `open` of arrays: the plaintext, or nil when the tag does not match.
    public func open(nonce: UInt64, ad: [UInt8], ciphertext: [UInt8]) -> [UInt8]? {
        guard ciphertext.count >= SessionCryptoSizes.tagBytes else { return nil }
        var out = [UInt8](repeating: 0, count: ciphertext.count - SessionCryptoSizes.tagBytes)
        let ok = ad.withUnsafeBytes { a in
            ciphertext.withUnsafeBytes { c in
                out.withUnsafeMutableBytes { o in open(nonce: nonce, ad: a, ciphertext: c, output: o) }
            }
        }
        return ok ? out : nil
    }
}

/// Sizes every implementation shares.
public enum SessionCryptoSizes {
    /// X25519 keys and shared secrets, AES-256 keys, SHA-256 digests.
    public static let keyBytes = 32
    /// AES-GCM's tag.
    public static let tagBytes = 16
}

/// The daemon's long-term X25519 key pair (docs/protocol.md 8.4).
public struct StaticKeyPair: Sendable, Equatable {
    public let privateKey: [UInt8]
    public let publicKey: [UInt8]

    public init(privateKey: [UInt8], crypto: any SessionCrypto) {
        self.privateKey = privateKey
        self.publicKey = crypto.x25519PublicKey(privateKey: privateKey)
    }
}

/// How public keys are written for people (`--server-key`, the ready line, `known-daemons`):
/// 43 characters of base64url without padding; 64 hex digits are read too.
public enum PublicKeyText {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ key: [UInt8]) -> String {
        var out: [UInt8] = []
        var index = 0
        while index < key.count {
            let b0 = UInt32(key[index])
            let b1 = index + 1 < key.count ? UInt32(key[index + 1]) : 0
            let b2 = index + 2 < key.count ? UInt32(key[index + 2]) : 0
            let word = b0 << 16 | b1 << 8 | b2
            let produced = min(4, (key.count - index) * 8 / 6 + 1)
            for k in 0..<produced { out.append(alphabet[Int(word >> (18 - 6 * UInt32(k)) & 63)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A 32-byte key from its text, or nil.
    public static func decode(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        if bytes.count == 64 { return hex(bytes) }
        guard bytes.count == 43 else { return nil }
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in bytes {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // The last character's two low bits are padding: canonical text has them zero.
        guard out.count == 32, buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }

    /// 64 hex digits (either case) as 32 bytes, or nil.
    public static func hex(_ digits: [UInt8]) -> [UInt8]? {
        guard digits.count == 64 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        var i = 0
        while i < 64 {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    /// Lowercase hex.
    public static func hexString(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
