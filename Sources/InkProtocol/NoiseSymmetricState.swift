/// Noise's SymmetricState and CipherState (Noise Protocol Framework revision 34, sections 5.1
/// and 5.2) for `Noise_NK_25519_AESGCM_SHA256`: the chaining key, the handshake hash and the
/// current key with its nonce. Primitives come from `SessionCrypto`.
struct NoiseSymmetricState {
    static let protocolName = Array("Noise_NK_25519_AESGCM_SHA256".utf8)

    private let crypto: any SessionCrypto
    /// The handshake hash.
    private(set) var h: [UInt8]
    /// The chaining key.
    private var ck: [UInt8]
    private var key: (any PacketAEAD)?
    private var n: UInt64 = 0

    init(crypto: any SessionCrypto) {
        self.crypto = crypto
        // A name of at most 32 bytes is padded with zeros, not hashed.
        var name = NoiseSymmetricState.protocolName
        name.append(contentsOf: repeatElement(0, count: SessionCryptoSizes.keyBytes - name.count))
        h = name
        ck = name
    }

    mutating func mixHash(_ data: [UInt8]) {
        h = crypto.sha256(h + data)
    }

    mutating func mixKey(_ input: [UInt8]) {
        let out = crypto.hkdfSHA256(salt: ck, ikm: input, info: [], count: 2 * SessionCryptoSizes.keyBytes)
        ck = Array(out[0..<32])
        key = crypto.aead(key: Array(out[32..<64]))
        n = 0
    }

    /// ENCRYPT(k, n++, h, plaintext), then MixHash of the ciphertext. Before any key the
    /// plaintext passes as is (NK keys both payloads, so this does not happen here).
    mutating func encryptAndHash(_ plaintext: [UInt8]) -> [UInt8] {
        guard let key else {
            mixHash(plaintext)
            return plaintext
        }
        let ciphertext = key.seal(nonce: n, ad: h, plaintext: plaintext)
        n += 1
        mixHash(ciphertext)
        return ciphertext
    }

    /// The reverse of `encryptAndHash`; nil when the tag does not match.
    mutating func decryptAndHash(_ ciphertext: [UInt8]) -> [UInt8]? {
        guard let key else {
            mixHash(ciphertext)
            return ciphertext
        }
        guard let plaintext = key.open(nonce: n, ad: h, ciphertext: ciphertext) else { return nil }
        n += 1
        mixHash(ciphertext)
        return plaintext
    }

    /// The two transport keys: initiator -> responder, responder -> initiator.
    func split() -> (initiatorToResponder: [UInt8], responderToInitiator: [UInt8]) {
        let out = crypto.hkdfSHA256(salt: ck, ikm: [], info: [], count: 2 * SessionCryptoSizes.keyBytes)
        return (Array(out[0..<32]), Array(out[32..<64]))
    }
}
