/// The 96-bit AES-GCM nonce of a Noise packet number: 4 zero bytes, then the 64-bit counter
/// big-endian (docs/protocol.md 4.3), in a buffer a C library reads. One per AEAD context.
final class NoiseNonce {
    let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: 12)

    init() { bytes.initialize(repeating: 0, count: 12) }
    deinit { bytes.deallocate() }

    /// Sets the counter and returns the buffer.
    func set(_ n: UInt64) -> UnsafeMutablePointer<UInt8> {
        for k in 0..<8 { bytes[4 + k] = UInt8(truncatingIfNeeded: n >> UInt64(56 - 8 * k)) }
        return bytes
    }
}
