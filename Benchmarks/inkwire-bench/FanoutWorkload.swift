import InkCodec

/// What every drawer of the fanout benchmark plays: a lesson cut into the 60 ms batches a live
/// sender makes, each due at the end of its window (lesson rate). The lesson is translated as
/// many times over as the run needs (one translator, times shifted by the lesson's length, so
/// stroke ids stay fresh and times never go back).
struct FanoutWorkload {
    /// The batches, in order, with their commands' times.
    let batches: [[TimedCommand]]
    /// When each batch is due, microseconds after the start of the first copy of the lesson.
    let dueMicroseconds: [UInt64]
    /// The length of one copy of the lesson (the loop period), microseconds.
    let loopMicroseconds: UInt64

    /// Most copies of the lesson a run strings together (a bound on memory).
    static let maxCopies = 64

    /// `lines` translated `copies` times, each copy `periodMs` after the previous.
    init(lines: [TraceLine], copies: Int) {
        let lastMs = lines.last?.timeMs ?? 0
        // One batch window of silence between copies, so the copies never share a batch.
        let periodMs = (lastMs / Batch.liveFlushMs + 2) * Batch.liveFlushMs
        var translator = LegacyTranslator(author: AuthorID(1))
        var commands: [TimedCommand] = []
        commands.reserveCapacity(lines.count * copies)
        for copy in 0..<max(1, min(copies, FanoutWorkload.maxCopies)) {
            let shift = UInt64(copy) * periodMs
            for line in lines { commands.append(translator.timedCommand(from: line.message, timeMs: line.timeMs + shift)) }
        }
        let cut = Batch.cut(commands, author: AuthorID(1), windowMs: Batch.liveFlushMs)
        batches = cut.map(\.commands)
        dueMicroseconds = cut.map { (($0.commands[0].timeMs / Batch.liveFlushMs) + 1) * Batch.liveFlushMs * 1000 }
        loopMicroseconds = periodMs * 1000
    }

    /// A lesson-like stand-in when no trace is given: strokes of 24 points at 60 Hz across the
    /// board, 400 ms apart, a pen change every 10 strokes, 60 s long.
    static func syntheticLines() -> [TraceLine] {
        var text: [UInt8] = []
        var t: UInt64 = 100
        var stroke = 0
        while t < 60_000 {
            if stroke % 10 == 0 { text += Array("\(t),3,\(stroke / 10 % 6),\(stroke / 10 % 3 + 1)\n".utf8) }
            for i in 0..<24 {
                let x = 0.05 + 0.9 * Double(i) / 23
                let y = 0.1 + 0.8 * Double(stroke % 17) / 16 + 0.01 * Double(i % 3)
                let phase = i == 0 ? 1 : 2
                text += Array("\(t),1,\(decimal(x)),\(decimal(y)),\(phase)\n".utf8)
                t += 17
            }
            stroke += 1
            t += 400
        }
        return (try? Trace.parse(text)) ?? []
    }

    /// `%f`-style text of a coordinate in [0, 1].
    private static func decimal(_ v: Double) -> String {
        let millionths = Int(v * 1_000_000)
        let fraction = String(millionths % 1_000_000)
        return "\(millionths / 1_000_000)." + String(repeating: "0", count: 6 - fraction.count) + fraction
    }
}

/// One drawer's walk through the workload: it starts `phase` microseconds into the lesson
/// (rooms are spread over the lesson, as real classes are at different moments) and plays
/// from there at lesson rate.
struct FanoutSchedule {
    let workload: FanoutWorkload
    let phase: UInt64
    /// The next batch to send.
    private(set) var next: Int

    init(workload: FanoutWorkload, phase: UInt64) {
        self.workload = workload
        self.phase = phase
        next = workload.dueMicroseconds.firstIndex { $0 >= phase } ?? workload.batches.count
    }

    /// The batch due by `elapsed` microseconds after the drawing started, if any.
    mutating func due(elapsed: UInt64) -> [TimedCommand]? {
        guard next < workload.batches.count, workload.dueMicroseconds[next] - phase <= elapsed else { return nil }
        next += 1
        return workload.batches[next - 1]
    }
}
