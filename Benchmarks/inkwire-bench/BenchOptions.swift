import Foundation

/// One subcommand's command line, read the same way by every subcommand: `--name VALUE` or
/// `--name=VALUE` for options, bare `--name` for the flags it declares, `-h`/`--help` for its usage.
/// Values are checked against their bounds when asked for; `finish` (or a bad value) prints the
/// problem and the usage and exits 64, `--help` prints the usage and exits 0.
struct BenchOptions {
    /// Why the arguments were not read: a problem to print with the usage, or `-h`/`--help`.
    struct Invalid: Error, CustomStringConvertible {
        let description: String
        var askedForHelp = false
    }

    let command: String
    let usage: String
    private var values: [String: String] = [:]
    private var flagsSeen: Set<String> = []

    /// Reads `arguments` against the option names (`--runs`) and flag names it knows; an unknown
    /// name, a repeated one or an option without its value is `Invalid`.
    init(_ arguments: [String], command: String, usage: String, options: Set<String>, flags: Set<String> = []) throws(Invalid) {
        self.command = command
        self.usage = usage
        var index = 0
        while index < arguments.count {
            var name = arguments[index]
            var inline: String?
            if let eq = name.firstIndex(of: "="), name.hasPrefix("--") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            index += 1
            if name == "-h" || name == "--help" { throw Invalid(description: "usage asked for", askedForHelp: true) }
            if flags.contains(name), inline == nil {
                flagsSeen.insert(name)
                continue
            }
            guard options.contains(name) else { throw Invalid(description: "unknown option '\(name)'") }
            guard values[name] == nil else { throw Invalid(description: "\(name) given twice") }
            if let inline {
                values[name] = inline
            } else {
                guard index < arguments.count else { throw Invalid(description: "\(name) needs a value") }
                values[name] = arguments[index]
                index += 1
            }
        }
    }

    /// Parses or exits: the usual entry point of a subcommand.
    static func read(_ arguments: [String], command: String, usage: String, options: Set<String>, flags: Set<String> = []) -> BenchOptions {
        do {
            return try BenchOptions(arguments, command: command, usage: usage, options: options, flags: flags)
        } catch let error where error.askedForHelp {
            print(usage)
            exit(0)
        } catch {
            fail(command: command, usage: usage, error.description)
        }
    }

    static func fail(command: String, usage: String, _ message: String) -> Never {
        FileHandle.standardError.write(Data("inkwire-bench \(command): \(message)\n\(usage)\n".utf8))
        exit(64)
    }

    /// Prints `message` and the usage, exits 64.
    func fail(_ message: String) -> Never { BenchOptions.fail(command: command, usage: usage, message) }

    func text(_ name: String) -> String? { values[name] }

    func flag(_ name: String) -> Bool { flagsSeen.contains(name) }

    /// A whole number in `range`, or `fallback` when the option is absent.
    func integer<T: FixedWidthInteger>(_ name: String, _ range: ClosedRange<T>, default fallback: T) -> T {
        guard let text = values[name] else { return fallback }
        guard let n = T(text), range.contains(n) else {
            fail("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
        }
        return n
    }

    /// A number in `range`, or `fallback` when the option is absent.
    func number(_ name: String, _ range: ClosedRange<Double>, default fallback: Double) -> Double {
        guard let text = values[name] else { return fallback }
        guard let n = Double(text), range.contains(n) else {
            fail("\(name) must be a number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
        }
        return n
    }
}
