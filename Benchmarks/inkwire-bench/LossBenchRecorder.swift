import InkCodec

/// What one room's drawer plays: a slice of the trace cut into the 60 ms batches a live client
/// sends, each due when its window closes, every command stamped with the moment it was made
/// (its trace time on the drawer's clock).
struct LossRoomPlan {
    var batches: [[TimedCommand]] = []
    /// When batch `i` goes, in µs after the room's start.
    var dueMicroseconds: [UInt64] = []
    /// Every command in order, and when it was made, in µs after the room's start.
    var commands: [TimedCommand] = []
    var madeMicroseconds: [UInt64] = []

    /// Commands of `lines` from the first stroke start (or non-point command) at or after
    /// `offsetMs`, for `durationMs`, translated for `author`.
    init(trace lines: [TraceLine], offsetMs: UInt64, durationMs: UInt64, author: AuthorID) {
        guard let first = lines.firstIndex(where: { line in
            guard line.timeMs >= offsetMs else { return false }
            if case .point(_, _, _, let phase) = line.message { return phase == .start }
            return true
        }) else { return }
        let startMs = lines[first].timeMs
        var translator = LegacyTranslator(author: author)
        var timed: [TimedCommand] = []
        for line in lines[first...] {
            guard line.timeMs < startMs + durationMs else { break }
            timed.append(translator.timedCommand(from: line.message, timeMs: line.timeMs))
        }
        let window = Batch.liveFlushMs
        let firstWindowMs = (startMs / window) * window
        for batch in Batch.cut(timed, author: author, windowMs: window) {
            batches.append(batch.commands)
            dueMicroseconds.append(((batch.commands[0].timeMs / window + 1) * window - firstWindowMs) * 1000)
            for command in batch.commands {
                commands.append(command)
                madeMicroseconds.append((command.timeMs - firstWindowMs) * 1000)
            }
        }
    }

    var pointCount: Int { commands.reduce(0) { $0 + ($1.command.isPoint ? 1 : 0) } }
}

extension Command {
    var isPoint: Bool {
        if case .point = self { return true }
        return false
    }
}

/// Checks every delivery against the drawer's plan (exactly once, in order) and keeps the
/// end-to-end latency of each command that arrived in order.
final class LossRecorder {
    /// Most latency samples kept per run (a sample is 4 bytes); past it deliveries are still
    /// checked but no longer timed (counted in `untimed`).
    static let maximumSamples = 50_000_000

    struct Watcher {
        var room: Int
        /// Index of the next command this watcher must get.
        var cursor = 0
        /// Deliveries that were not the next command (duplicate, gap, reorder, wrong content).
        var violations = 0
    }

    let plans: [LossRoomPlan]
    private(set) var watchers: [Watcher] = []
    /// Legacy app watchers (their own cursors over `legacyExpectations`, their own latencies).
    private(set) var legacyWatchers: [Watcher] = []
    private var legacyExpectations: [Int: LegacyExpectation] = [:]
    private(set) var legacyLatencies: [UInt32] = []
    /// When each room's playback started (µs, monotonic); nil before.
    var roomStart: [UInt64?]
    /// Commands each drawer has handed to its transport.
    var sentCommands: [Int]
    private(set) var latencies: [UInt32] = []
    private(set) var untimed = 0
    private(set) var pointsDelivered = 0

    init(plans: [LossRoomPlan]) {
        self.plans = plans
        roomStart = Array(repeating: nil, count: plans.count)
        sentCommands = Array(repeating: 0, count: plans.count)
    }

    /// Registers a watcher of `room`; returns its index for `delivered`.
    func addWatcher(room: Int) -> Int {
        watchers.append(Watcher(room: room))
        return watchers.count - 1
    }

    /// Registers a legacy app watching `room`; returns its index for `legacyDelivered`.
    func addLegacyWatcher(room: Int) -> Int {
        if legacyExpectations[room] == nil { legacyExpectations[room] = LegacyExpectation(plan: plans[room]) }
        legacyWatchers.append(Watcher(room: room))
        return legacyWatchers.count - 1
    }

    /// A legacy watcher's text commands: pen styles are skipped (state, see
    /// `LegacyExpectation`); each other message must be the next one owed.
    func legacyDelivered(_ messages: [LegacyMessage], to watcher: Int, at now: UInt64) {
        let room = legacyWatchers[watcher].room
        guard let expectation = legacyExpectations[room] else { return }
        for message in messages {
            if case .penStyle = message { continue }
            let cursor = legacyWatchers[watcher].cursor
            guard cursor < expectation.messages.count, expectation.messages[cursor] == message, let start = roomStart[room] else {
                legacyWatchers[watcher].violations += 1
                continue
            }
            legacyWatchers[watcher].cursor += 1
            let made = start + plans[room].madeMicroseconds[expectation.commandIndex[cursor]]
            if legacyLatencies.count < LossRecorder.maximumSamples { legacyLatencies.append(UInt32(clamping: now >= made ? now - made : 0)) }
        }
    }

    /// Legacy messages owed so far, delivered in order, and the wrong ones.
    var legacyExpected: Int {
        legacyWatchers.reduce(0) { $0 + (legacyExpectations[$1.room]?.owed(sent: sentCommands[$1.room]) ?? 0) }
    }
    var legacyInOrder: Int { legacyWatchers.reduce(0) { $0 + $1.cursor } }
    var legacyViolations: Int { legacyWatchers.reduce(0) { $0 + $1.violations } }

    func delivered(_ commands: [TimedCommand], to watcher: Int, at now: UInt64) {
        let room = watchers[watcher].room
        let plan = plans[room]
        for command in commands {
            let cursor = watchers[watcher].cursor
            guard cursor < plan.commands.count, plan.commands[cursor] == command, let start = roomStart[room] else {
                watchers[watcher].violations += 1
                continue
            }
            watchers[watcher].cursor += 1
            if command.command.isPoint { pointsDelivered += 1 }
            let made = start + plan.madeMicroseconds[cursor]
            if latencies.count < LossRecorder.maximumSamples {
                latencies.append(UInt32(clamping: now >= made ? now - made : 0))
            } else {
                untimed += 1
            }
        }
    }

    /// Deliveries owed so far: each sent command to each watcher of its room.
    var expected: Int { watchers.reduce(0) { $0 + sentCommands[$1.room] } }
    /// Deliveries that arrived in order.
    var inOrder: Int { watchers.reduce(0) { $0 + $1.cursor } }
    var violations: Int { watchers.reduce(0) { $0 + $1.violations } }
    /// Every command of every plan reached every watcher.
    var isComplete: Bool {
        watchers.allSatisfy { $0.cursor == plans[$0.room].commands.count }
            && legacyWatchers.allSatisfy { $0.cursor == legacyExpectations[$0.room]?.messages.count }
    }
}

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
