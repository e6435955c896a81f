// `inkwire demo-trace`: writes a made-up lesson in the trace format, so the README walkthrough
// and the tests need no recorded trace. The same seed gives the same bytes.
import Foundation
import InkCodec

let demoTraceUsage = """
    usage: inkwire demo-trace [--seconds N] [--seed N] > lesson.csv
      A lesson written on the board for N seconds (default 300): handwriting-like strokes sampled at
      60 Hz in rows, pen colour and width changes, a few undos, redos and eraser strokes, and a clear
      when the board is full. Lines are t_ms,<HYWhiteboard command> (what inkwire send --trace reads).

    """

func runDemoTraceCommand(_ arguments: [String]) -> Int32 {
    let flags: ParsedFlags
    do { flags = try ParsedFlags(arguments, allowed: ["--seconds", "--seed"]) } catch {
        printError("demo-trace", "\(error)")
        FileHandle.standardError.write(Data(demoTraceUsage.utf8))
        return ClientExit.badArguments
    }
    if flags.helpRequested {
        FileHandle.standardOutput.write(Data(demoTraceUsage.utf8))
        return ClientExit.ok
    }
    guard let seconds = UInt64(flags.string("--seconds") ?? "300"), (1...86_400).contains(seconds),
          let seed = UInt64(flags.string("--seed") ?? "1") else {
        printError("demo-trace", "--seconds must be 1 to 86400 and --seed a whole number")
        return ClientExit.badArguments
    }
    var out: [UInt8] = []
    var lesson = DemoLesson(seed: seed)
    for line in lesson.lines(durationMs: seconds * 1000) { Trace.append(line, to: &out) }
    FileHandle.standardOutput.write(Data(out))
    return ClientExit.ok
}

/// A teacher writing rows of words. Coordinates are millionths of the view, as the app sends.
struct DemoLesson {
    private var state: UInt64

    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    /// SplitMix64.
    private mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    private mutating func between(_ low: Double, _ high: Double) -> Double { low + (high - low) * unit() }
    private mutating func chance(_ p: Double) -> Bool { unit() < p }

    mutating func lines(durationMs: UInt64) -> [TraceLine] {
        var lines: [TraceLine] = []
        var t: UInt64 = 1000
        var x = 0.06
        var row = 0
        let rows = 9
        func emit(_ message: LegacyMessage) { lines.append(TraceLine(timeMs: t, message: message)) }
        func micro(_ v: Double) -> Int32 { Int32((min(max(v, 0), 1) * 1_000_000).rounded()) }
        while t < durationMs {
            if chance(0.03), let style = PenStyle(color: UInt8(next() % 5), width: UInt8(1 + next() % 3)) {
                emit(.penStyle(style))
                t += 400
            }
            // One letter-like stroke: a loop or hook drawn around (x, baseline).
            let baseline = 0.08 + Double(row) * 0.1
            let size = between(0.012, 0.03)
            let turns = between(0.5, 1.6)
            let phase = between(0, 2 * .pi)
            let points = 8 + Int(next() % 32)
            let eraser = chance(0.02)
            for i in 0..<points {
                let s = Double(i) / Double(points - 1)
                let angle = phase + s * turns * 2 * .pi
                let px = x + s * size * 1.2 + size * 0.5 * cos(angle)
                let py = baseline - size * 0.5 * (1 + sin(angle))
                let phaseOfPoint: StrokePhase = i == 0 ? .start : i == points - 1 ? .end : .move
                emit(.point(tool: eraser ? .eraser : .pen, x: micro(px), y: micro(py), phase: phaseOfPoint))
                t += i == points - 2 ? 50 : (i % 3 == 2 ? 17 : 16)
            }
            t += UInt64(between(120, 500))
            if chance(0.03) {
                emit(.undo)
                t += 300
                if chance(0.5) {
                    emit(.redo)
                    t += 300
                }
            }
            // Letters advance along the row; a word gap now and then; a full board is cleared.
            x += size * 1.3 + (chance(0.2) ? 0.03 : 0)
            if x > 0.92 {
                x = 0.06
                row += 1
                t += 800
                if row == rows {
                    row = 0
                    emit(.clear)
                    t += 1500
                }
            }
        }
        return lines
    }
}
