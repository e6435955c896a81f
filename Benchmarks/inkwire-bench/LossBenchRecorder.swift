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
    var isComplete: Bool { watchers.allSatisfy { $0.cursor == plans[$0.room].commands.count } }
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
    var daemonCPUSeconds = 0.0
    var daemonRSSMegabytes = 0.0
    var interrupted = false
    /// Seconds from creating the members to the last join accepted (through the impaired link).
    var joinSeconds = 0.0
    /// Why the run is not to be trusted (a member failed, the drain timed out), if it is not.
    var note: String?

    var completeness: Double {
        guard expected > 0 else { return 0 }
        return Double(delivered) / Double(expected)
    }

    /// Nearest-rank percentile in ms (0 with no samples).
    func percentileMs(_ p: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let rank = min(latencies.count, max(1, Int((p * Double(latencies.count)).rounded(.up))))
        return Double(latencies[rank - 1]) / 1000
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
        if let note {
            let escaped = note.map { $0 == "\"" || $0 == "\\" ? "\\\($0)" : $0.isNewline ? " " : "\($0)" }.joined()
            fields.append(("note", "\"\(escaped)\""))
        }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}
