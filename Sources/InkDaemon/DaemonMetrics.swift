import InkRelay
import InkVersion

/// The daemon's Prometheus series (issue 7): one place that names them all.
final class DaemonMetrics {
    let registry = MetricsRegistry()
    let sessions: Gauge
    let rooms: Gauge
    let members: Gauge
    let datagramsReceived: Counter
    let datagramsSent: Counter
    let bytesReceived: Counter
    let bytesSent: Counter
    let retransmissions: Counter
    let rtt: Histogram
    let reorderDepth: Gauge
    let historyBytes: Gauge
    let syncsInProgress: Gauge
    let refusedJoins: Counter
    let handshakes: Counter
    private let errorCounter: Counter
    let connectionsAccepted: Counter
    let legacyMessages: Counter
    let legacyRefused: Counter
    let storePending: Gauge
    let storeCommits: Counter
    let storeCommitSeconds: FractionalCounter
    let reloads: Counter
    let quotaRefusals: Counter
    let membersEvicted: Counter
    let membersTimedOut: Counter
    let roomsReleased: Counter
    let metricsConnectionsDropped: Counter
    /// The admission limits in force (`limit(...)`), one gauge family each.
    private var limitGauges: [String: Gauge] = [:]
    let process = ProcessMetrics()

    /// The limits shown as `inkwire_limit_*` gauges: name, help (0 is no bound where a bound may be off).
    static let limitSeries: [(String, String)] = [
        ("rooms", "Most rooms held in memory (--max-rooms)."),
        ("members_per_room", "Most members of one room (--max-members)."),
        ("sessions_per_user", "Most sessions of one user name in one room (--max-sessions-per-user; 0: no bound)."),
        ("sessions_per_address", "Most native and web sessions of one address in one room (--max-sessions-per-address; 0: no bound)."),
        ("legacy_per_address", "Most legacy connections of one address in one room (--max-legacy-per-address; 0: no bound)."),
        ("member_reserve", "Places of a room kept for teacher and presenter tokens (--member-reserve)."),
        ("member_timeout_seconds", "A member silent this long is closed (--member-timeout; 0: never)."),
        ("member_idle_after_seconds", "A member that has not drawn for this long is idle (--member-idle-after)."),
        ("rooms_per_address_per_minute", "Rooms one address may create per minute with open rooms (--rooms-per-address-per-minute; 0: no bound)."),
        ("empty_room_expiry_seconds", "An empty room without history leaves memory after this long (--empty-room-expiry; 0: never)."),
    ]

    /// RTT buckets in seconds: LAN round trips are well under 10 ms, Wi-Fi spikes reach 100s.
    static let rttBuckets: [Double] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2]

    init() {
        sessions = registry.gauge("inkwire_sessions", help: "Open sessions by transport.", labels: ["transport"])
        rooms = registry.gauge("inkwire_rooms", help: "Rooms held in memory.")
        members = registry.gauge("inkwire_members", help: "Members present in all rooms.")
        datagramsReceived = registry.counter("inkwire_datagrams_received_total", help: "UDP datagrams received.")
        datagramsSent = registry.counter("inkwire_datagrams_sent_total", help: "UDP datagrams sent.")
        bytesReceived = registry.counter("inkwire_received_bytes_total", help: "Bytes received, by transport.", labels: ["transport"])
        bytesSent = registry.counter("inkwire_sent_bytes_total", help: "Bytes sent, by transport.", labels: ["transport"])
        retransmissions = registry.counter("inkwire_retransmissions_total", help: "ARQ segments sent again.")
        rtt = registry.histogram("inkwire_rtt_seconds", help: "Smoothed round-trip time of native UDP sessions, sampled.", buckets: DaemonMetrics.rttBuckets)
        reorderDepth = registry.gauge("inkwire_reorder_depth", help: "Segments held out of order, all sessions.")
        historyBytes = registry.gauge("inkwire_history_bytes", help: "Payload bytes of room history kept by the store.")
        syncsInProgress = registry.gauge("inkwire_syncs_in_progress", help: "History syncs under way.")
        refusedJoins = registry.counter("inkwire_refused_joins_total", help: "Joins refused, by reason.", labels: ["reason"])
        handshakes = registry.counter("inkwire_handshakes_total", help: "Native handshakes (initiations), by result.", labels: ["result"])
        errorCounter = registry.counter("inkwire_errors_total", help: "Errors, by kind.", labels: ["kind"])
        connectionsAccepted = registry.counter("inkwire_connections_accepted_total", help: "TCP connections accepted, by listener.", labels: ["transport"])
        legacyMessages = registry.counter("inkwire_legacy_messages_total", help: "Legacy text messages, by direction.", labels: ["direction"])
        legacyRefused = registry.counter("inkwire_legacy_refused_total",
                                         help: "Legacy connections closed at accept: the address is outside the listener's networks, by room.", labels: ["room"])
        storePending = registry.gauge("inkwire_store_pending_ops", help: "Appends not yet durable.")
        storeCommits = registry.counter("inkwire_store_commits_total", help: "Room log commits (transactions made durable) since start.")
        storeCommitSeconds = registry.fractionalCounter("inkwire_store_commit_seconds_total",
                                                        help: "Time spent in room log commits (transaction and fsync), seconds.")
        reloads = registry.counter("inkwire_reloads_total", help: "Configuration reloads (SIGHUP).")
        quotaRefusals = registry.counter("inkwire_quota_refusals_total", help: "Joins refused by an admission quota, by quota.", labels: ["quota"])
        for quota in [RelayQuota.sessionsPerUser, .sessionsPerAddress, .legacyPerAddress, .roomsPerAddress] { _ = quotaRefusals.labels(quota.rawValue) }
        membersEvicted = registry.counter("inkwire_members_evicted_total",
                                          help: "Idle members closed to make way: for a newer session of their user, or a teacher or presenter in a full room.",
                                          labels: ["quota"])
        for quota in [RelayQuota.sessionsPerUser, .memberReserve] { _ = membersEvicted.labels(quota.rawValue) }
        membersTimedOut = registry.counter("inkwire_members_timed_out_total", help: "Members closed after --member-timeout without a message.")
        roomsReleased = registry.counter("inkwire_rooms_released_total", help: "Empty rooms without history released from memory (--empty-room-expiry).")
        metricsConnectionsDropped = registry.counter("inkwire_metrics_connections_dropped_total",
                                                     help: "Metrics listener connections closed before an answer: idle too long, or to make way for a new one.",
                                                     labels: ["reason"])
        for reason in ["timeout", "evicted"] { _ = metricsConnectionsDropped.labels(reason) }
        for (name, help) in DaemonMetrics.limitSeries { limitGauges[name] = registry.gauge("inkwire_limit_" + name, help: help) }
        for transport in ["udp", "tcp", "legacy", "web"] { _ = sessions.labels(transport) }
        registry.gauge("inkwire_build_info", help: "Always 1; the labels say which build runs.", labels: ["version", "commit"])
            .labels(InkwireVersion.string, InkwireVersion.commit).set(1)
        process.register(in: registry)
    }

    /// Shows the limits in force.
    func showLimits(_ limits: DaemonLimits) {
        let values: [String: Double] = [
            "rooms": Double(limits.maxRooms), "members_per_room": Double(limits.maxMembersPerRoom),
            "sessions_per_user": Double(limits.maxSessionsPerUser), "sessions_per_address": Double(limits.maxSessionsPerAddress),
            "legacy_per_address": Double(limits.maxLegacyPerAddress), "member_reserve": Double(limits.memberReserve),
            "member_timeout_seconds": Double(limits.memberTimeoutMs) / 1000, "member_idle_after_seconds": Double(limits.memberIdleMs) / 1000,
            "rooms_per_address_per_minute": Double(limits.roomsPerAddressPerMinute),
            "empty_room_expiry_seconds": Double(limits.emptyRoomExpiryMs) / 1000,
        ]
        for (name, value) in values { limitGauges[name]?.set(value) }
    }

    /// The counter of one error kind (`garbage_datagram`, `bad_frame`, `disk_full`...).
    func errors(kind: String) -> CounterCell { errorCounter.labels(kind) }
}
