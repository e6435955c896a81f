// inkwire: the command-line client. Each subcommand lives in its own file; add one line here.
import Foundation

let subcommands: [(name: String, summary: String, run: ([String]) -> Int32)] = [
    ("codec", "convert whiteboard data: codec --from trace|legacy|binary --to trace|legacy|binary", runCodecCommand),
]

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let subcommand = subcommands.first(where: { $0.name == name }) else {
    var usage = "usage: inkwire <command> [options]\n"
    for s in subcommands { usage += "  \(s.name)\t\(s.summary)\n" }
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}
exit(subcommand.run(Array(arguments.dropFirst())))
