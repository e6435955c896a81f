// The lesson trace as the codec benchmarks read it.
import InkCodec

/// A trace read as one legacy connection reads it: legacy text -> model, one author.
struct BenchTrace {
    var commands: [TimedCommand]
    /// What the legacy app spends on it: payload plus the 6-byte frame header per command.
    var legacyBytes: Int

    init(_ text: [UInt8]) throws {
        let lines = try Trace.parse(text)
        var translator = LegacyTranslator(author: AuthorID(1))
        commands = lines.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }
        legacyBytes = lines.reduce(0) { $0 + $1.message.bytes.count + 6 }
    }
}
