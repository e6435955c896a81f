import Foundation
@testable import InkCodec

/// The package root (Tests/InkCodecTests/<this file> -> root).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// ../shared/traces/lesson-a.csv next to the package (or next to the worktree folder), or nil
/// when absent: tests that need it then return early.
func lessonTrace() -> [UInt8]? {
    for relative in ["../shared/traces/lesson-a.csv", "../../shared/traces/lesson-a.csv"] {
        let url = packageRoot.appendingPathComponent(relative)
        if let data = try? Data(contentsOf: url) { return [UInt8](data) }
    }
    return nil
}

func vectorFile(_ name: String) throws -> [String] {
    let text = try String(contentsOf: packageRoot.appendingPathComponent("Vectors/\(name)"), encoding: .utf8)
    return text.split(separator: "\n").map(String.init).filter { !$0.isEmpty && !$0.hasPrefix("#") }
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

func unhex(_ text: some StringProtocol) -> [UInt8]? {
    let chars = Array(text.utf8)
    guard chars.count % 2 == 0 else { return nil }
    var out: [UInt8] = []
    var i = 0
    while i < chars.count {
        guard let b = UInt8(String(decoding: chars[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
        out.append(b)
        i += 2
    }
    return out
}

/// SplitMix64: a tiny seeded generator so property tests replay from their printed seed.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// The property tests' seeds: fixed ones plus one from INKWIRE_SEED when set.
func propertySeeds() -> [UInt64] {
    var seeds: [UInt64] = [1, 2, 0xdead_beef]
    if let text = ProcessInfo.processInfo.environment["INKWIRE_SEED"], let seed = UInt64(text) { seeds.append(seed) }
    return seeds
}

func randomMessage(_ rng: inout SeededRandom) -> LegacyMessage {
    func coordinate() -> Int32 {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: Int32.random(in: -1_100_000...1_100_000, using: &rng)
        case 1: Int32.random(in: Int32.min...Int32.max, using: &rng)
        case 2: [0, 1, -1, 999_999, 1_000_000, -1_000_000, Int32.max, Int32.min].randomElement(using: &rng)!
        default: Int32.random(in: -20...20, using: &rng)
        }
    }
    switch Int.random(in: 0..<10, using: &rng) {
    case 0..<6:
        return .point(tool: Bool.random(using: &rng) ? .pen : .eraser, x: coordinate(), y: coordinate(),
                      phase: StrokePhase.allCases.randomElement(using: &rng)!)
    case 6:
        return .penStyle(PenStyle(color: UInt8.random(in: 0...5, using: &rng), width: UInt8.random(in: 1...3, using: &rng))!)
    case 7: return .undo
    case 8: return .redo
    default: return .clear
    }
}
