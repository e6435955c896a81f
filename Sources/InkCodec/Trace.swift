// The trace format of ../shared/traces: one legacy command per line, prefixed by its time.

/// `t_ms,<command>`: `<command>` is the exact payload of a legacy text frame.
public struct TraceLine: Hashable, Sendable {
    public var timeMs: UInt64
    public var message: LegacyMessage

    public init(timeMs: UInt64, message: LegacyMessage) {
        self.timeMs = timeMs
        self.message = message
    }
}

/// Why a trace was rejected; `line` counts from 1.
public struct TraceError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Reason: Error, Hashable, Sendable {
        /// Longer than `Trace.maxLineBytes`.
        case lineTooLong
        /// The time field is missing or not a decimal of at most `Trace.maxTimeDigits` digits.
        case badTime
        /// Earlier than the line before (times never decrease).
        case timeWentBack
        case message(LegacyTextError)
    }

    public var line: Int
    public var reason: Reason

    public init(line: Int, reason: Reason) {
        self.line = line
        self.reason = reason
    }

    public var description: String {
        switch reason {
        case .lineTooLong: "line \(line): longer than \(Trace.maxLineBytes) bytes"
        case .badTime: "line \(line): bad time field"
        case .timeWentBack: "line \(line): time decreases"
        case .message(let e): "line \(line): \(e)"
        }
    }
}

public enum Trace {
    /// Longest line accepted (time, comma, the longest legacy message).
    public static let maxLineBytes = 96
    /// Digits of the time field (milliseconds; 15 digits are over 31 000 years).
    public static let maxTimeDigits = 15

    /// Parses a whole trace. Lines end with `\n`; empty lines are skipped.
    public static func parse(_ text: [UInt8]) throws(TraceError) -> [TraceLine] {
        var lines: [TraceLine] = []
        var lineNumber = 0
        var start = 0
        var previous: UInt64 = 0
        while start < text.count {
            lineNumber += 1
            var end = start
            while end < text.count && text[end] != UInt8(ascii: "\n") { end += 1 }
            defer { start = end + 1 }
            if end == start { continue }
            let line: TraceLine
            do { line = try parseLine(text[start..<end]) } catch { throw TraceError(line: lineNumber, reason: error) }
            guard line.timeMs >= previous else { throw TraceError(line: lineNumber, reason: .timeWentBack) }
            previous = line.timeMs
            lines.append(line)
        }
        return lines
    }

    /// Parses one line without its `\n`.
    public static func parseLine(_ line: ArraySlice<UInt8>) throws(TraceError.Reason) -> TraceLine {
        guard line.count <= maxLineBytes else { throw .lineTooLong }
        guard let comma = line.firstIndex(of: UInt8(ascii: ",")),
              comma > line.startIndex, comma - line.startIndex <= maxTimeDigits else { throw .badTime }
        var time: UInt64 = 0
        for byte in line[..<comma] {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { throw .badTime }
            time = time * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        do {
            return TraceLine(timeMs: time, message: try LegacyMessage(parsing: line[(comma + 1)...]))
        } catch {
            throw .message(error)
        }
    }

    /// Appends one line with its `\n`.
    public static func append(_ line: TraceLine, to out: inout [UInt8]) {
        appendTime(line.timeMs, to: &out)
        out.append(UInt8(ascii: ","))
        line.message.append(to: &out)
        out.append(UInt8(ascii: "\n"))
    }

    public static func format(_ lines: [TraceLine]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(lines.count * 30)
        for line in lines { append(line, to: &out) }
        return out
    }

    private static func appendTime(_ t: UInt64, to out: inout [UInt8]) {
        if t >= 10 { appendTime(t / 10, to: &out) }
        out.append(UInt8(ascii: "0") + UInt8(t % 10))
    }
}
