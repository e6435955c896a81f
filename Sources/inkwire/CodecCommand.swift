// `inkwire codec`: converts whiteboard data between the trace, legacy and binary forms.
import Foundation
import InkCodec

/// The forms `inkwire codec` reads and writes.
enum CodecForm: String, CaseIterable {
    /// `t_ms,<command>` lines, as ../shared/traces.
    case trace
    /// One legacy app command per line, no times. Read with times on a 60 Hz grid from 0
    /// (line n at round(n * 1000 / 60) ms: the pace of raw touch samples).
    case legacy
    /// The compact binary codec's batches (see CodecBinaryStream.swift).
    case binary
}

struct CodecCommandError: Error, CustomStringConvertible {
    var description: String
}

let codecUsage = """
    usage: inkwire codec --from trace|legacy|binary --to trace|legacy|binary [--author N] < in > out
      trace   t_ms,<command> lines (../shared/traces)
      legacy  one HYWhiteboard command per line; read at 60 Hz from t = 0
      binary  compact binary batches (the trace cut into 60 ms batches)
      --author N  the author id given to trace and legacy input (default 1)

    """

func runCodecCommand(_ arguments: [String]) -> Int32 {
    var from: CodecForm?
    var to: CodecForm?
    var author = AuthorID(1)
    var i = 0
    // `--flag=value` is `--flag value`.
    let arguments = arguments.flatMap { argument -> [String] in
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return [argument] }
        return [String(argument[..<equals]), String(argument[argument.index(after: equals)...])]
    }
    while i < arguments.count {
        let value = i + 1 < arguments.count ? arguments[i + 1] : nil
        switch (arguments[i], value) {
        case ("--from", let v?): from = CodecForm(rawValue: v)
        case ("--to", let v?): to = CodecForm(rawValue: v)
        case ("--author", let v?):
            guard let n = UInt32(v) else { from = nil; i = arguments.count; continue }
            author = AuthorID(n)
        default: from = nil; i = arguments.count; continue
        }
        i += 2
    }
    guard let from, let to else {
        FileHandle.standardError.write(Data(codecUsage.utf8))
        return 2
    }
    do {
        let input = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
        let batches = try readCodecForm(from, input, author: author)
        let output = try writeCodecForm(to, batches)
        FileHandle.standardOutput.write(Data(output))
        return 0
    } catch {
        FileHandle.standardError.write(Data("inkwire codec: \(error)\n".utf8))
        return 1
    }
}

/// Input as the batches a live sender of `author` would produce.
func readCodecForm(_ form: CodecForm, _ input: [UInt8], author: AuthorID) throws -> [Batch] {
    switch form {
    case .trace:
        var translator = LegacyTranslator(author: author)
        let commands = try Trace.parse(input).map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }
        return Batch.cut(commands, author: author)
    case .legacy:
        var translator = LegacyTranslator(author: author)
        var commands: [TimedCommand] = []
        for (n, line) in input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).enumerated() {
            let message: LegacyMessage
            do { message = try LegacyMessage(parsing: line) } catch {
                throw CodecCommandError(description: "line \(n + 1): \(error)")
            }
            commands.append(translator.timedCommand(from: message, timeMs: legacyLineTimeMs(n)))
        }
        return Batch.cut(commands, author: author)
    case .binary:
        return try decodeBinaryStream(input)
    }
}

/// Line n of legacy input is stamped round(n * 1000 / 60) ms.
func legacyLineTimeMs(_ n: Int) -> UInt64 {
    (UInt64(n) * 1000 + 30) / 60
}

func writeCodecForm(_ form: CodecForm, _ batches: [Batch]) throws -> [UInt8] {
    if form == .binary { return try encodeBinaryStream(batches) }
    let authors = batches.map(\.author).reduce(into: [AuthorID]()) { if !$0.contains($1) { $0.append($1) } }
    guard authors.count <= 1 else {
        throw CodecCommandError(description: "\(authors.count) authors in the input; \(form) holds one author's commands")
    }
    var out: [UInt8] = []
    var index = 0
    for batch in batches {
        for timed in batch.commands {
            index += 1
            guard let message = LegacyMessage(transcribing: timed.command) else {
                throw CodecCommandError(description: "command \(index) (\(timed.command.kind)) has no legacy form")
            }
            if form == .trace {
                Trace.append(TraceLine(timeMs: timed.timeMs, message: message), to: &out)
            } else {
                message.append(to: &out)
                out.append(UInt8(ascii: "\n"))
            }
        }
    }
    return out
}
