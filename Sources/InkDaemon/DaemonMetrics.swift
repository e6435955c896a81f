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
    let process = ProcessMetrics()

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
        for transport in ["udp", "tcp", "legacy", "web"] { _ = sessions.labels(transport) }
        registry.gauge("inkwire_build_info", help: "Always 1; the labels say which build runs.", labels: ["version", "commit"])
            .labels(InkwireVersion.string, InkwireVersion.commit).set(1)
        process.register(in: registry)
    }

    /// The counter of one error kind (`garbage_datagram`, `bad_frame`, `disk_full`...).
    func errors(kind: String) -> CounterCell { errorCounter.labels(kind) }
}
