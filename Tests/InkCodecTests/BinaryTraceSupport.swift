// Test support: reads ../shared/traces/lesson-a.csv straight into model commands (one author,
// stroke ids counted from 1), independent of the legacy codec, for the binary codec's tests.
import Glibc
@testable import InkCodec

enum BinaryTraceSupport {
    /// The trace's bytes, or nil when no `shared/traces` lies beside the package (or a folder
    /// above it, for git worktrees).
    static func lessonA(file: String = #filePath) -> [UInt8]? {
        var parts = file.split(separator: "/", omittingEmptySubsequences: false)
        while let last = parts.last, last != "Tests" { parts.removeLast() }
        guard !parts.isEmpty else { return nil }
        parts.removeLast(2)  // Tests, then the package root
        while !parts.isEmpty {
            if let bytes = readFile(parts.joined(separator: "/") + "/shared/traces/lesson-a.csv") { return bytes }
            parts.removeLast()
        }
        return nil
    }

    private static func readFile(_ path: String) -> [UInt8]? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return out
    }

    /// Parses `t,kind,...` lines into timed commands (coordinates as exact millionths).
    static func commands(_ text: [UInt8]) -> [TimedCommand] {
        var out: [TimedCommand] = []
        var stroke: UInt32 = 0
        for line in text.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: ","))
            let t = UInt64(number(fields[0]))
            let code = number(fields[1])
            switch code {
            case 1, 2:
                let phase = StrokePhase(rawValue: UInt8(number(fields[4])))!
                if phase == .start { stroke += 1 }
                let p = StrokePoint(
                    stroke: StrokeID(stroke), tool: code == 1 ? .pen : .eraser, phase: phase,
                    x: Int32(number(fields[2])), y: Int32(number(fields[3])))
                out.append(TimedCommand(timeMs: t, command: .point(p)))
            case 3:
                out.append(TimedCommand(timeMs: t, command: .penStyle(PenStyle(color: UInt8(number(fields[2])), width: UInt8(number(fields[3])))!)))
            case 4: out.append(TimedCommand(timeMs: t, command: .undo(StrokeID(stroke))))
            case 5: out.append(TimedCommand(timeMs: t, command: .redo(StrokeID(stroke))))
            default: out.append(TimedCommand(timeMs: t, command: .clear))
            }
        }
        return out
    }

    /// A decimal with optional sign and dot, as an integer of its digits ("0.266667" -> 266667).
    private static func number(_ s: ArraySlice<UInt8>) -> Int64 {
        var v: Int64 = 0
        var negative = false
        for c in s {
            if c == UInt8(ascii: "-") { negative = true } else if c != UInt8(ascii: ".") { v = v * 10 + Int64(c - 48) }
        }
        return negative ? -v : v
    }
}
