// The admission quotas of a relay: what one user, one address or one idle member may hold, so
// that one student cannot lock a class out. Changeable while the relay runs (SIGHUP).
import InkProtocol

/// Where a session comes from, for the quotas counted per address: the device's IP address as
/// text, without its port (an IPv4 peer of a dual-stack socket as IPv4). The daemon gives nil
/// for a session no per-address quota counts (an exempt network, an address it does not know).
public struct SourceHost: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let text: String
    public init(_ text: String) { self.text = text }
    public static func < (a: SourceHost, b: SourceHost) -> Bool { a.text < b.text }
    public var description: String { text }
}

/// Bounds on what one user, one address and idle members may hold (docs/relay.md, Admission).
/// A zero count or a nil duration turns that bound off; all are off by default (the daemon's
/// settings turn them on).
public struct RelayQuotas: Sendable, Equatable {
    /// Sessions one user name may hold in one room. At the bound, the user's oldest idle
    /// session makes way for the new one; with none idle the join is refused (`quotaExceeded`).
    public var maxSessionsPerUser = 0
    /// Native and web sessions one source address may hold in one room (a session whose token
    /// grants teacher or presenter is not held back by it).
    public var maxSessionsPerAddress = 0
    /// Legacy (HYWhiteboard) connections one source address may hold in one room.
    public var maxLegacyPerAddress = 0
    /// Members of `RelayLimits.maxMembersPerRoom` only a teacher or presenter token may take,
    /// when joins need tokens. In a room full to the bound such a token still gets in: an idle
    /// viewer session of its own user makes way, else the oldest idle member without a token.
    public var memberReserve = 0
    /// A member (native or web) that sends nothing, not even a `ping`, for this long is closed
    /// (`goingAway(idle)`). Legacy apps are timed out by their own heartbeat instead.
    public var memberTimeout: Instant.Duration?
    /// A member that has not drawn (no batch, upload or room command) for this long, since it
    /// joined, is idle: it is the one that makes way when a quota says someone must.
    public var idleAfter = Instant.Duration.milliseconds(60_000)
    /// Rooms one source address may create per minute when joins need no token (a burst of
    /// this many, then one every 60 s / N). Token joins and legacy rooms are not counted.
    public var roomsPerAddressPerMinute = 0
    /// A room with no member and no history is dropped from memory after this long, so its
    /// slot of `RelayLimits.maxRooms` comes back (rooms with history stay, as after a restart).
    /// Not on a bridged relay: the bridge keeps its rooms.
    public var emptyRoomExpiry: Instant.Duration?

    /// Addresses whose room creations are remembered at once; past it a new address may not
    /// create a room until older entries lapse (a minute after their last creation).
    public static let maxTrackedCreators = 4096
    /// How often silent members and empty rooms are looked for.
    public static let sweepInterval = Instant.Duration.milliseconds(1000)

    public init() {}

    /// Whether any bound needs the periodic sweep.
    var needsSweep: Bool { memberTimeout != nil || emptyRoomExpiry != nil || roomsPerAddressPerMinute > 0 }
}

/// Which quota decided, as metrics and logs name it.
public enum RelayQuota: String, Hashable, Sendable {
    case sessionsPerUser = "sessions_per_user"
    case sessionsPerAddress = "sessions_per_address"
    case legacyPerAddress = "legacy_per_address"
    case roomsPerAddress = "rooms_per_address"
    case memberReserve = "member_reserve"
}
