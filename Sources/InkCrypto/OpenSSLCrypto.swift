import CCrypto
import InkProtocol

/// `SessionCrypto` on OpenSSL's libcrypto (Debian's OpenSSL 3.0): X25519, AES-256-GCM,
/// SHA-256, HMAC-SHA256, HKDF-SHA256 and its random source; packets' AES-256-GCM goes through
/// libsodium where the CPU has AES-NI (`SodiumAESGCM`, the same cipher, cheaper per packet).
/// Every primitive is a library's; this file only moves bytes in and out of it. Thread-safe (every call makes its own
/// contexts), except the AEAD contexts it hands out, which belong to one session.
public final class OpenSSLCrypto: SessionCrypto, @unchecked Sendable {
    public init() {}

    /// One instance serves a whole process.
    public static let shared = OpenSSLCrypto()

    public func randomBytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        // RAND_bytes fails only when the system has no entropy to seed from: nothing can be
        // keyed safely then, so stop rather than run with predictable keys.
        guard count == 0 || RAND_bytes(&out, Int32(count)) == 1 else { fatalError("OpenSSL RAND_bytes failed: no entropy") }
        return out
    }

    public func x25519PublicKey(privateKey: [UInt8]) -> [UInt8] {
        guard privateKey.count == 32, let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32) else {
            return [UInt8](repeating: 0, count: 32)
        }
        defer { EVP_PKEY_free(key) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &out, &length) == 1, length == 32 else { return [UInt8](repeating: 0, count: 32) }
        return out
    }

    public func x25519(privateKey: [UInt8], publicKey: [UInt8]) -> [UInt8]? {
        guard privateKey.count == 32, publicKey.count == 32,
              let mine = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32) else { return nil }
        defer { EVP_PKEY_free(mine) }
        guard let theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, publicKey, 32) else { return nil }
        defer { EVP_PKEY_free(theirs) }
        guard let ctx = EVP_PKEY_CTX_new(mine, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer(ctx, theirs) == 1,
              EVP_PKEY_derive(ctx, &out, &length) == 1, length == 32 else { return nil }
        // A low-order public key gives all zeros (OpenSSL refuses it too; checked again here).
        return out.contains(where: { $0 != 0 }) ? out : nil
    }

    public func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = EVP_Digest(data, data.count, &out, &length, EVP_sha256(), nil)
        return out
    }

    public func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = key.withUnsafeBytes { k in
            data.withUnsafeBufferPointer { d in HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), d.baseAddress, d.count, &out, &length) }
        }
        return Array(out.prefix(32))
    }

    public func hkdfSHA256(salt: [UInt8], ikm: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard let ctx = EVP_KDF_CTX_new(OpenSSLCrypto.hkdf) else { return out }
        defer { EVP_KDF_CTX_free(ctx) }
        // One spare byte each: an empty array has no address, and OpenSSL reads a NULL key as
        // a missing one (Noise's Split uses an empty input).
        var salt = salt + [0], ikm = ikm + [0], info = info + [0]
        var digest = Array("SHA256".utf8CString)
        let ok = digest.withUnsafeMutableBufferPointer { d in
            salt.withUnsafeMutableBytes { s in
                ikm.withUnsafeMutableBytes { i in
                    info.withUnsafeMutableBytes { n in
                        // OSSL_PARAM keeps the name's pointer: static strings, not Swift
                        // Strings bridged for the call only.
                        var params = [
                            OSSL_PARAM_construct_utf8_string(OpenSSLCrypto.name("digest"), d.baseAddress, 0),
                            OSSL_PARAM_construct_octet_string(OpenSSLCrypto.name("key"), i.baseAddress, i.count - 1),
                            OSSL_PARAM_construct_octet_string(OpenSSLCrypto.name("salt"), s.baseAddress, s.count - 1),
                            OSSL_PARAM_construct_octet_string(OpenSSLCrypto.name("info"), n.baseAddress, n.count - 1),
                            OSSL_PARAM_construct_end(),
                        ]
                        return EVP_KDF_derive(ctx, &out, count, &params)
                    }
                }
            }
        }
        // HKDF-SHA256 fails only for a length above 255 x 32 bytes, which no caller asks.
        precondition(ok == 1, "HKDF-SHA256 failed")
        return out
    }

    public func aead(key: [UInt8]) -> any PacketAEAD {
        SodiumAESGCM.isAvailable ? SodiumAESGCM(key: key) : OpenSSLAESGCM(key: key)
    }

    /// OpenSSL's AES-256-GCM even where libsodium's is available (tests and benchmarks that
    /// compare the two).
    public func openSSLAEAD(key: [UInt8]) -> any PacketAEAD { OpenSSLAESGCM(key: key) }

    /// Which library seals packets on this CPU: "libsodium" or "openssl".
    public static var packetAEADName: String { SodiumAESGCM.isAvailable ? "libsodium" : "openssl" }

    /// libsodium's AES-256-GCM, or nil on a CPU without AES-NI.
    public func sodiumAEAD(key: [UInt8]) -> (any PacketAEAD)? { SodiumAESGCM.isAvailable ? SodiumAESGCM(key: key) : nil }

    /// A parameter name (OSSL_KDF_PARAM_*) in static memory.
    static func name(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    nonisolated(unsafe) static let hkdf = EVP_KDF_fetch(nil, "HKDF", nil)
    nonisolated(unsafe) static let aes256gcm = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)
}

/// AES-256-GCM with one key: an encryption and a decryption context, keyed once; each packet
/// sets only the nonce (the key schedule and GHASH key are not recomputed), and the tag moves
/// through a parameter array built once (`EVP_CIPHER_CTX_ctrl` rebuilds one per call: a
/// sixth of a small packet's cost).
final class OpenSSLAESGCM: PacketAEAD {
    private let key: [UInt8]
    private var encryptor: OpaquePointer?
    private var decryptor: OpaquePointer?
    private let nonceBuffer = NoiseNonce()
    /// The tag's scratch space and the `OSSL_PARAM` array that names it (tag, end).
    private let tag = UnsafeMutablePointer<UInt8>.allocate(capacity: 16)
    private let tagParams = UnsafeMutablePointer<OSSL_PARAM>.allocate(capacity: 2)

    init(key: [UInt8]) {
        self.key = key
        tag.initialize(repeating: 0, count: 16)
        tagParams[0] = OSSL_PARAM_construct_octet_string(OpenSSLCrypto.name("tag"), tag, 16)
        tagParams[1] = OSSL_PARAM_construct_end()
    }

    deinit {
        EVP_CIPHER_CTX_free(encryptor)
        EVP_CIPHER_CTX_free(decryptor)
        tag.deallocate()
        tagParams.deallocate()
    }

    private func context(encrypting: Bool) -> OpaquePointer {
        if let c = encrypting ? encryptor : decryptor { return c }
        guard let c = EVP_CIPHER_CTX_new() else { fatalError("OpenSSL: out of memory") }
        let ok = encrypting ? EVP_EncryptInit_ex2(c, OpenSSLCrypto.aes256gcm, key, nil, nil)
                            : EVP_DecryptInit_ex2(c, OpenSSLCrypto.aes256gcm, key, nil, nil)
        precondition(ok == 1 && key.count == 32, "AES-256-GCM key setup failed")
        if encrypting { encryptor = c } else { decryptor = c }
        return c
    }

    func seal(nonce: UInt64, ad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) {
        let c = context(encrypting: true)
        let iv = nonceBuffer.set(nonce)
        precondition(output.count >= plaintext.count + 16)
        var ok = EVP_EncryptInit_ex2(c, nil, nil, iv, nil) == 1
        if ad.count > 0 { ok = ok && EVP_Cipher(c, nil, ad.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt32(ad.count)) >= 0 }
        let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        if plaintext.count > 0 {
            ok = ok && EVP_Cipher(c, out, plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt32(plaintext.count)) >= 0
        }
        ok = ok && EVP_Cipher(c, nil, nil, 0) >= 0
        ok = ok && EVP_CIPHER_CTX_get_params(c, tagParams) == 1
        (out + plaintext.count).update(from: tag, count: 16)
        // Sealing with a valid key cannot fail; a packet that did would be unreadable, not unsafe.
        precondition(ok, "AES-256-GCM seal failed")
    }

    func open(nonce: UInt64, ad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) -> Bool {
        let n = ciphertext.count - 16
        guard n >= 0, output.count >= n else { return false }
        let c = context(encrypting: false)
        let iv = nonceBuffer.set(nonce)
        guard EVP_DecryptInit_ex2(c, nil, nil, iv, nil) == 1 else { return false }
        if ad.count > 0, EVP_Cipher(c, nil, ad.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt32(ad.count)) < 0 { return false }
        let source = ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self)
        if n > 0, EVP_Cipher(c, output.baseAddress!.assumingMemoryBound(to: UInt8.self), source, UInt32(n)) < 0 { return false }
        // The expected tag goes in through the scratch space (`ciphertext` is borrowed).
        tag.update(from: source + n, count: 16)
        guard EVP_CIPHER_CTX_set_params(c, tagParams) == 1 else { return false }
        return EVP_Cipher(c, nil, nil, 0) >= 0
    }
}
