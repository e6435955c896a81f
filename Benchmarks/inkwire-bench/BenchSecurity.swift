import InkCrypto
import InkProtocol

/// How a benchmark's members seal their sessions: OpenSSL against the daemon's key from its
/// ready line (as devices do), or the unsealed baseline (`FakeCrypto`, the daemon started with
/// `--insecure-unsealed-benchmark`): the same protocol, packet sizes and code paths, no AEAD.
struct BenchSecurity {
    let sealed: Bool
    let crypto: any SessionCrypto
    let serverKey: [UInt8]

    static func sealed(serverKey: [UInt8]) -> BenchSecurity { BenchSecurity(sealed: true, crypto: OpenSSLCrypto.shared, serverKey: serverKey) }

    static func unsealed(serverKey: [UInt8], seed: UInt64) -> BenchSecurity {
        BenchSecurity(sealed: false, crypto: FakeCrypto(seed: seed), serverKey: serverKey)
    }

    /// For a daemon started with or without `--insecure-unsealed-benchmark`.
    static func forDaemon(unsealed: Bool, serverKey: [UInt8], seed: UInt64 = 1) -> BenchSecurity {
        unsealed ? .unsealed(serverKey: serverKey, seed: seed) : .sealed(serverKey: serverKey)
    }

    /// The daemon flag for the unsealed baseline.
    static let unsealedDaemonArgument = "--insecure-unsealed-benchmark"

    /// The `public_key=` field of an `inkwired` ready line.
    static func publicKey(readyLine line: Substring) -> [UInt8]? {
        guard let range = line.range(of: " public_key=") else { return nil }
        let value = line[range.upperBound...].prefix { $0 != " " }.filter { $0 != "\"" }
        return PublicKeyText.decode(String(value))
    }
}
