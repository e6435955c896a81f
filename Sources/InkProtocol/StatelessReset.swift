/// Stateless reset tokens (docs/protocol.md 4.5): derived from the daemon's static private key
/// and a connection id alone, so a restarted daemon can prove to a device that its session is
/// gone, and nobody without the key can.
public struct StatelessReset: Sendable {
    public static let tokenBytes = 16
    /// Resets, notices and key replies a daemon sends per second, all together.
    public static let maxPerSecond = 1000
    static let label = Array("inkwire stateless reset".utf8)

    private let resetKey: [UInt8]
    private let crypto: any SessionCrypto

    public init(staticPrivateKey: [UInt8], crypto: any SessionCrypto) {
        self.crypto = crypto
        resetKey = crypto.hmacSHA256(key: staticPrivateKey, data: StatelessReset.label)
    }

    /// The first 16 bytes of HMAC-SHA256(resetKey, cid:u64).
    public func token(connectionID: UInt64) -> [UInt8] {
        var id: [UInt8] = []
        PacketCodec.appendU64(connectionID, to: &id)
        return Array(crypto.hmacSHA256(key: resetKey, data: id).prefix(StatelessReset.tokenBytes))
    }

    /// The reset packet for `connectionID`.
    public func packet(connectionID: UInt64) -> [UInt8] {
        PacketCodec.reset(connectionID: connectionID, token: token(connectionID: connectionID))
    }
}

/// A token bucket of `perSecond` events a second, bursts up to the same: the daemon's bound on
/// unauthenticated answers (resets, notices, key replies) and on handshakes.
public struct RateBudget: Sendable {
    public var perSecond: Int
    private var tokens: Double
    private var at: UInt64 = 0

    public init(perSecond: Int) {
        self.perSecond = perSecond
        tokens = Double(perSecond)
    }

    public mutating func allow(nowMicroseconds now: UInt64) -> Bool {
        let capacity = Double(perSecond)
        tokens = min(capacity, tokens + Double(now &- at) / 1_000_000 * capacity)
        at = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
