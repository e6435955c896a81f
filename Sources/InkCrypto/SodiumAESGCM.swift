import CSodium
import InkProtocol

/// AES-256-GCM with one key on libsodium's AES-NI implementation: the key schedule and the
/// GHASH powers are expanded once into a 512-byte state, and a packet is one call. The same
/// cipher as `OpenSSLAESGCM`, byte for byte; it only exists because it is cheaper per small
/// packet (docs/benchmarks.md, "Sealed sessions": OpenSSL 3's provider layer looks up
/// parameters by name on every packet, and its contexts are several times larger, which
/// matters with thousands of sessions whose contexts are cold).
final class SodiumAESGCM: PacketAEAD {
    /// libsodium has AES-256-GCM only on x86-64 with AES-NI and PCLMUL; elsewhere OpenSSL
    /// seals (`OpenSSLCrypto.aead`).
    static let isAvailable: Bool = sodium_init() >= 0 && crypto_aead_aes256gcm_is_available() == 1

    private let state: UnsafeMutableRawPointer
    private let stateBytes = crypto_aead_aes256gcm_statebytes()
    private let nonceBuffer = NoiseNonce()

    init(key: [UInt8]) {
        precondition(SodiumAESGCM.isAvailable && key.count == 32, "libsodium AES-256-GCM needs AES-NI and a 32-byte key")
        state = UnsafeMutableRawPointer.allocate(byteCount: stateBytes, alignment: 16)
        _ = crypto_aead_aes256gcm_beforenm(state.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self), key)
    }

    deinit {
        sodium_memzero(state, stateBytes)
        state.deallocate()
    }

    private var context: UnsafePointer<crypto_aead_aes256gcm_state> {
        UnsafePointer(state.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))
    }

    func seal(nonce: UInt64, ad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= plaintext.count + 16)
        let iv = nonceBuffer.set(nonce)
        let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // Never fails for a message this size (the limit is 64 GB).
        _ = crypto_aead_aes256gcm_encrypt_detached_afternm(
            out, out + plaintext.count, nil, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), nil, iv, context)
    }

    func open(nonce: UInt64, ad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) -> Bool {
        let n = ciphertext.count - 16
        guard n >= 0, output.count >= n else { return false }
        let iv = nonceBuffer.set(nonce)
        let source = ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self)
        return crypto_aead_aes256gcm_decrypt_detached_afternm(
            output.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, source, UInt64(n), source + n,
            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), iv, context) == 0
    }
}
