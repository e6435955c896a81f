import InkCrypto
import InkProtocol
import Testing

/// The two AES-256-GCM implementations behind `OpenSSLCrypto.aead` (libsodium where the CPU
/// has AES-NI, OpenSSL elsewhere) must be the same cipher: a device on one and a daemon on the
/// other read each other's packets.
@Suite struct PacketAEADTests {
    let crypto = OpenSSLCrypto.shared

    static func bytes(_ count: Int, _ salt: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ salt &* 7 &+ 1) } }

    static func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    /// McGrew and Viega's GCM test cases 13 and 14 (AES-256, zero key and IV): an empty
    /// message, and one zero block.
    @Test(arguments: ["openssl", "libsodium"])
    func publishedVectors(implementation: String) throws {
        let key = [UInt8](repeating: 0, count: 32)
        let aead = try #require(make(implementation, key), "no \(implementation) AES-256-GCM on this CPU")
        #expect(aead.seal(nonce: 0, ad: [], plaintext: []) == Self.hex("530f8afbc74536b9a963b4f1c4cb738b"))
        #expect(aead.seal(nonce: 0, ad: [], plaintext: [UInt8](repeating: 0, count: 16))
                == Self.hex("cea7403d4d606b6e074ec5d3baf39d18" + "d0d1c8a799996bf0265b98b5d48ab919"))
    }

    @Test func bothImplementationsSealTheSameBytesAndOpenEachOthers() throws {
        let key = Self.bytes(32, 99)
        let openssl = crypto.openSSLAEAD(key: key)
        guard let sodium = crypto.sodiumAEAD(key: key) else { return }
        for size in 0..<300 {
            let ad = Self.bytes(size % 23, size), plain = Self.bytes(size, size + 1)
            let nonce = UInt64(size) << 40 | UInt64(size)
            let a = openssl.seal(nonce: nonce, ad: ad, plaintext: plain)
            let b = sodium.seal(nonce: nonce, ad: ad, plaintext: plain)
            #expect(a == b, "size \(size)")
            #expect(sodium.open(nonce: nonce, ad: ad, ciphertext: a) == plain, "size \(size)")
            #expect(openssl.open(nonce: nonce, ad: ad, ciphertext: b) == plain, "size \(size)")
        }
    }

    /// Sessions seal and open in place (the packet's buffer is both input and output).
    @Test(arguments: ["openssl", "libsodium"])
    func inPlaceEqualsOutOfPlace(implementation: String) throws {
        guard let aead = make(implementation, Self.bytes(32, 5)) else { return }
        for size in [0, 1, 15, 16, 17, 44, 255, 1400] {
            let ad = Self.bytes(13, size), plain = Self.bytes(size, 3)
            let expected = aead.seal(nonce: 7, ad: ad, plaintext: plain)
            var buffer = plain + [UInt8](repeating: 0, count: 16)
            ad.withUnsafeBytes { a in
                buffer.withUnsafeMutableBytes { b in
                    aead.seal(nonce: 7, ad: a, plaintext: UnsafeRawBufferPointer(rebasing: b[0..<size]), output: b)
                }
            }
            #expect(buffer == expected, "size \(size)")
            let opened = ad.withUnsafeBytes { a in
                buffer.withUnsafeMutableBytes { b in aead.open(nonce: 7, ad: a, ciphertext: UnsafeRawBufferPointer(b), output: b) }
            }
            #expect(opened && Array(buffer.prefix(size)) == plain, "size \(size)")
        }
    }

    @Test(arguments: ["openssl", "libsodium"])
    func aChangedByteOrNonceDoesNotOpen(implementation: String) throws {
        guard let aead = make(implementation, Self.bytes(32, 8)) else { return }
        let ad = Self.bytes(13, 1), plain = Self.bytes(44, 2)
        let sealed = aead.seal(nonce: 3, ad: ad, plaintext: plain)
        for i in sealed.indices {
            var bad = sealed
            bad[i] ^= 0x01
            #expect(aead.open(nonce: 3, ad: ad, ciphertext: bad) == nil, "byte \(i)")
        }
        var badAD = ad
        badAD[0] ^= 0x80
        #expect(aead.open(nonce: 3, ad: badAD, ciphertext: sealed) == nil)
        #expect(aead.open(nonce: 4, ad: ad, ciphertext: sealed) == nil)
        #expect(aead.open(nonce: 3, ad: ad, ciphertext: Array(sealed.prefix(15))) == nil)
    }

    private func make(_ implementation: String, _ key: [UInt8]) -> (any PacketAEAD)? {
        implementation == "openssl" ? crypto.openSSLAEAD(key: key) : crypto.sodiumAEAD(key: key)
    }
}
