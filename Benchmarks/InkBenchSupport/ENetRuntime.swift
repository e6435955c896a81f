import CENet
import Glibc

/// Process-wide ENet setup: `enet_initialize` runs once, on first use, and `enet_deinitialize`
/// is registered to run at process exit. Every ENet type here touches this first.
public enum ENetRuntime {
    /// Channel carrying joins and join acknowledgements.
    public static let controlChannel: UInt8 = 0
    /// Channel carrying command batches, reliable and ordered.
    public static let batchChannel: UInt8 = 1
    /// Channels every host opens (control + batches).
    public static let channelCount = 2

    /// How long a reliable packet may go unacknowledged before ENet drops the peer. A dropped
    /// member measures the timeout, not the latency, so it is long: ENet's defaults (5 s once
    /// the resend timeout has doubled five times, 30 s at most) and then inkwired's own 15 s
    /// dead-peer silence both dropped members at 20 % loss, because ENet counts from the oldest
    /// unacknowledged packet and doubles its resend timeout with no ceiling (inkwired's probe
    /// timeout stops at 2 s).
    public static let peerTimeoutMs: UInt32 = 60_000

    /// Applies `peerTimeoutMs` to a peer (ENet's retry limit stays its default).
    static func configure(_ peer: UnsafeMutablePointer<ENetPeer>) {
        enet_peer_timeout(peer, 0, peerTimeoutMs, peerTimeoutMs)
    }

    /// Initializes ENet once; throws if the library refused.
    public static func ensureInitialized() throws(ENetError) {
        if !initialized { throw .initializeFailed }
    }

    private static let initialized: Bool = {
        guard enet_initialize() == 0 else { return false }
        atexit { enet_deinitialize() }
        return true
    }()

    /// Monotonic clock in nanoseconds, for latency stamps.
    public static func nowNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Builds an ENet address from a dotted IPv4 host and a port (ENet keeps ports host-order).
    static func address(host: String, port: UInt16) throws(ENetError) -> ENetAddress {
        var address = ENetAddress()
        guard enet_address_set_host_ip(&address, host) == 0 else { throw .badAddress(host) }
        address.port = port
        return address
    }
}

/// What can go wrong setting up ENet hosts and peers.
public enum ENetError: Error, Equatable, Sendable {
    case initializeFailed
    case badAddress(String)
    case hostCreateFailed
    case connectFailed
    case connectTimedOut
    case joinTimedOut
    case roomNameTooLong(Int)
    case batchTooLarge(Int)
    case sendFailed
    case notJoined
}

/// Splits `HOST:PORT` (IPv4 only), e.g. `127.0.0.1:0`.
public func parseENetListen(_ text: String) -> (host: String, port: UInt16)? {
    guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
    return (String(text[..<colon]), port)
}
