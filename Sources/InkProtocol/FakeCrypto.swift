import InkCodec

/// NOT CRYPTOGRAPHY. A stand-in for `SessionCrypto` that runs the real handshake, key phases,
/// replay window and packet formats at almost no cost and deterministically from a seed: for
/// the simulator, protocol tests that need no secrecy, and the benchmarks' unsealed baseline.
/// It hides nothing and checks no content: "DH" is XOR (a public key is its private key),
/// hashes are FNV-1a, and a tag only names the key and nonce a packet was sealed with (so a
/// packet opens only with the right key and number, as a real one would).
public final class FakeCrypto: SessionCrypto, @unchecked Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public func randomBytes(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            // SplitMix64.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            for k in 0..<8 where out.count < count { out.append(UInt8(truncatingIfNeeded: z >> UInt64(8 * k))) }
        }
        return out
    }

    public func x25519PublicKey(privateKey: [UInt8]) -> [UInt8] { privateKey }

    public func x25519(privateKey: [UInt8], publicKey: [UInt8]) -> [UInt8]? {
        guard privateKey.count == 32, publicKey.count == 32 else { return nil }
        let shared = zip(privateKey, publicKey).map { $0 ^ $1 }
        return shared.allSatisfy({ $0 == 0 }) ? nil : shared
    }

    public func sha256(_ data: [UInt8]) -> [UInt8] { FakeCrypto.expand(data, count: 32) }

    public func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] { FakeCrypto.expand(key + [0x5c] + data, count: 32) }

    public func hkdfSHA256(salt: [UInt8], ikm: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        FakeCrypto.expand(salt + [0x36] + ikm + [0x36] + info, count: count)
    }

    public func aead(key: [UInt8]) -> any PacketAEAD { FakeAEAD(key: key) }

    /// `count` bytes of FNV-1a 64 over `data` with a block counter.
    static func expand(_ data: [UInt8], count: Int) -> [UInt8] {
        var out: [UInt8] = []
        var block: UInt8 = 0
        while out.count < count {
            var h = FNV1a64()
            h.add(block)
            h.add(data)
            for k in 0..<8 where out.count < count { out.append(UInt8(truncatingIfNeeded: h.value >> UInt64(8 * k))) }
            block &+= 1
        }
        return out
    }
}

/// Copies the plaintext; the tag is the key's fingerprint and the nonce.
final class FakeAEAD: PacketAEAD {
    private let fingerprint: UInt64

    init(key: [UInt8]) {
        var h = FNV1a64()
        h.add(key)
        fingerprint = h.value
    }

    private func tag(_ nonce: UInt64, into b: UnsafeMutableRawBufferPointer, at i: Int) {
        for k in 0..<8 {
            b[i + k] = UInt8(truncatingIfNeeded: fingerprint >> UInt64(8 * k))
            b[i + 8 + k] = UInt8(truncatingIfNeeded: nonce >> UInt64(8 * k))
        }
    }

    func seal(nonce: UInt64, ad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) {
        if let from = plaintext.baseAddress, let to = output.baseAddress, from != UnsafeRawPointer(to), plaintext.count > 0 {
            to.copyMemory(from: from, byteCount: plaintext.count)
        }
        tag(nonce, into: output, at: plaintext.count)
    }

    func open(nonce: UInt64, ad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) -> Bool {
        let n = ciphertext.count - SessionCryptoSizes.tagBytes
        guard n >= 0 else { return false }
        for k in 0..<8 {
            guard ciphertext[n + k] == UInt8(truncatingIfNeeded: fingerprint >> UInt64(8 * k)),
                  ciphertext[n + 8 + k] == UInt8(truncatingIfNeeded: nonce >> UInt64(8 * k)) else { return false }
        }
        if let from = ciphertext.baseAddress, let to = output.baseAddress, from != UnsafeRawPointer(to), n > 0 {
            to.copyMemory(from: from, byteCount: n)
        }
        return true
    }
}
