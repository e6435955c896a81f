/// One (transport, loss level) of a loss run, as reported.
struct LossRunResult {
    var transport: String
    var lossPercent: Double
    var rttMilliseconds: Int
    var rooms: Int
    var members: Int
    var seed: UInt64
    /// "proxy", "netns" or "unimpaired".
    var link: String
    var durationSeconds: Double
    /// TCP congestion control the packet-level link's namespaces use (empty otherwise).
    var tcpCongestionControl = ""
    /// inkwire-tcp's retransmission-timeout ceiling at both ends, ms (0 the kernel's; nil for other transports).
    var tcpRetransmitCeilingMs: Int?
    var commandsSent = 0
    var expected = 0
    var delivered = 0
    var violations = 0
    /// Latencies in µs, sorted.
    var latencies: [UInt32] = []
    var wireBytes = 0
    /// Packets the packet-level link's devices dropped outside the loss model (should be 0).
    var linkDeviceDrops = 0
    var pointsDelivered = 0
    /// The relay's CPU: inkwired's or the ENet relay's, plus the kcptun servers' for the
    /// tunnelled transports (`tunnelServerCPUSeconds` is that part).
    var daemonCPUSeconds = 0.0
    /// The relay's peak RSS (plus the kcptun servers' peaks, added up).
    var daemonRSSMegabytes = 0.0
    /// kcptun only: the servers' CPU (inside `daemonCPUSeconds`), the members' clients' CPU (not
    /// in it: the devices' side), and how many of each ran.
    var tunnelServerCPUSeconds: Double?
    var tunnelClientCPUSeconds: Double?
    var tunnelServers = 0
    var tunnelClients = 0
    /// kcp-go's counters over the play and drain, added up over every tunnel (servers and
    /// clients, the legacy one too): `tunnelCounterNames`, in that order.
    var tunnelCounters: [(String, Int)] = []
    /// The counters reported: packets and segments sent, segments resent (by timeout, fast
    /// resend, early resend), segments lost by the RTO's verdict, duplicates received, data
    /// packets FEC rebuilt, parity packets received, FEC groups given up as too short.
    static let tunnelCounterNames = ["OutPkts", "OutSegs", "RetransSegs", "FastRetransSegs", "EarlyRetransSegs", "LostSegs",
                                     "RepeatSegs", "FECRecovered", "FECParityShards", "FECShortShards"]
    /// Legacy app watchers (kcptun rows: one in room 0): owed messages, delivered in order,
    /// wrong ones, and their latencies in µs, sorted.
    var legacyWatchers = 0
    var legacyExpected = 0
    var legacyDelivered = 0
    var legacyViolations = 0
    var legacyLatencies: [UInt32] = []
    /// Bytes of the legacy app's tunnel on the link (not in `wireBytes`).
    var legacyWireBytes = 0
    var interrupted = false
    /// Seconds from creating the members to the last join accepted (through the impaired link).
    var joinSeconds = 0.0
    /// Why the run is not to be trusted (a member failed, the drain timed out), if it is not.
    var note: String?

    /// "FECRecovered" -> "fec_recovered", "OutPkts" -> "out_pkts".
    static func snakeCase(_ name: String) -> String {
        var out = ""
        let characters = Array(name)
        for (index, character) in characters.enumerated() {
            let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
            let previousIsLower = index > 0 && characters[index - 1].isLowercase
            if character.isUppercase && index > 0 && (previousIsLower || nextIsLower) { out += "_" }
            out += character.lowercased()
        }
        return out
    }

    var completeness: Double {
        guard expected > 0 else { return 0 }
        return Double(delivered) / Double(expected)
    }

    var legacyCompleteness: Double {
        guard legacyExpected > 0 else { return 0 }
        return Double(legacyDelivered) / Double(legacyExpected)
    }

    /// Every watcher (native and legacy) got everything it was owed.
    var isComplete: Bool { completeness == 1 && (legacyWatchers == 0 || legacyCompleteness == 1) }

    /// Nearest-rank percentile in ms (0 with no samples).
    func percentileMs(_ p: Double) -> Double { LossRunResult.percentileMs(p, of: latencies) }

    /// A legacy watcher's nearest-rank percentile in ms.
    func legacyPercentileMs(_ p: Double) -> Double { LossRunResult.percentileMs(p, of: legacyLatencies) }

    static func percentileMs(_ p: Double, of sorted: [UInt32]) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = min(sorted.count, max(1, Int((p * Double(sorted.count)).rounded(.up))))
        return Double(sorted[rank - 1]) / 1000
    }

    var wireBytesPerPoint: Double { pointsDelivered > 0 ? Double(wireBytes) / Double(pointsDelivered) : 0 }

    var json: String {
        func number(_ value: Double, _ places: Int = 3) -> String {
            var scale = 1.0
            for _ in 0..<places { scale *= 10 }
            let rounded = (value * scale).rounded() / scale
            return rounded == rounded.rounded() ? "\(Int(rounded))" : "\(rounded)"
        }
        var fields: [(String, String)] = [
            ("bench", "\"loss\""), ("transport", "\"\(transport)\""), ("loss_percent", number(lossPercent)),
            ("rtt_ms", "\(rttMilliseconds)"), ("rooms", "\(rooms)"), ("members", "\(members)"), ("seed", "\(seed)"),
            ("link", "\"\(link)\""), ("tcp_cc", "\"\(tcpCongestionControl)\""), ("tcp_rto_max_ms", tcpRetransmitCeilingMs.map { "\($0)" } ?? "null"),
            ("duration_s", number(durationSeconds)),
            ("p50_ms", number(percentileMs(0.5))), ("p99_ms", number(percentileMs(0.99))),
            ("p999_ms", number(percentileMs(0.999))), ("max_ms", number(percentileMs(1))),
            ("completeness", number(completeness, 6)), ("commands_sent", "\(commandsSent)"), ("deliveries_expected", "\(expected)"),
            ("deliveries_in_order", "\(delivered)"), ("violations", "\(violations)"), ("samples", "\(latencies.count)"),
            ("wire_bytes", "\(wireBytes)"), ("link_device_drops", "\(linkDeviceDrops)"), ("points_delivered", "\(pointsDelivered)"),
            ("wire_bytes_per_point", number(wireBytesPerPoint, 2)), ("daemon_cpu_s", number(daemonCPUSeconds)),
            ("daemon_rss_mb", number(daemonRSSMegabytes, 1)), ("join_s", number(joinSeconds, 2)), ("interrupted", interrupted ? "true" : "false"),
        ]
        if let server = tunnelServerCPUSeconds, let client = tunnelClientCPUSeconds {
            fields += [("kcptun_servers", "\(tunnelServers)"), ("kcptun_clients", "\(tunnelClients)"),
                       ("kcptun_server_cpu_s", number(server)), ("kcptun_client_cpu_s", number(client))]
            fields += tunnelCounters.map { ("kcptun_" + LossRunResult.snakeCase($0.0), "\($0.1)") }
        }
        if legacyWatchers > 0 {
            fields += [("legacy_watchers", "\(legacyWatchers)"), ("legacy_p50_ms", number(legacyPercentileMs(0.5))),
                       ("legacy_p99_ms", number(legacyPercentileMs(0.99))), ("legacy_max_ms", number(legacyPercentileMs(1))),
                       ("legacy_completeness", number(legacyCompleteness, 6)), ("legacy_messages_expected", "\(legacyExpected)"),
                       ("legacy_messages_in_order", "\(legacyDelivered)"), ("legacy_violations", "\(legacyViolations)"),
                       ("legacy_wire_bytes", "\(legacyWireBytes)")]
        }
        if let note {
            let escaped = note.map { $0 == "\"" || $0 == "\\" ? "\\\($0)" : $0.isNewline ? " " : "\($0)" }.joined()
            fields.append(("note", "\"\(escaped)\""))
        }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}
