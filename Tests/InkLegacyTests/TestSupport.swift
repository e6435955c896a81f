import Foundation
import InkCodec

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The lesson trace's lines (../shared/traces/lesson-a.csv beside the package or its worktree
/// folder), or nil where the shared folder is missing (the tests that need it then skip).
let lessonLines: [TraceLine]? = {
    for relative in ["../shared/traces/lesson-a.csv", "../../shared/traces/lesson-a.csv"] {
        if let data = try? Data(contentsOf: packageRoot.appendingPathComponent(relative)) {
            return try? Trace.parse([UInt8](data))
        }
    }
    return nil
}()

/// The lesson from `fromMs` to `toMs` (trace times, times kept), cut after the last stroke that
/// ends before `toMs` (a stroke cut in the middle has no end, and the app only gets whole ones).
func lessonSlice(_ fromMs: UInt64, _ toMs: UInt64) -> [TraceLine]? {
    guard let all = lessonLines else { return nil }
    var lines = all.filter { $0.timeMs >= fromMs && $0.timeMs < toMs }
    if let lastEnd = lines.lastIndex(where: { if case .point(_, _, _, .end) = $0.message { true } else { false } }) {
        lines = Array(lines[...lastEnd])
    }
    return lines
}

/// The property tests' seeds: 1...count (INKWIRE_SEEDS=N for more), or INKWIRE_SEED alone.
func propertySeeds(_ count: UInt64) -> [UInt64] {
    let n = ProcessInfo.processInfo.environment["INKWIRE_SEEDS"].flatMap { UInt64($0) } ?? count
    var seeds = Array(1...n)
    if let text = ProcessInfo.processInfo.environment["INKWIRE_SEED"], let seed = UInt64(text) { seeds = [seed] }
    return seeds
}
