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
