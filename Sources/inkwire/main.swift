// inkwire: the command-line client. Each subcommand lives in its own file; add one line here.
import Foundation

let subcommands: [(name: String, summary: String, run: ([String]) -> Int32)] = [
    ("codec", "convert whiteboard data: codec --from trace|legacy|binary --to trace|legacy|binary", runCodecCommand),
    ("send", "play a trace into a room: send --server udp://HOST:PORT --room R [--user U] [--role R] [--token T] --trace FILE [--speed N]", runSendCommand),
    ("watch", "print a room's commands: watch --server udp://HOST:PORT --room R [--format legacy|json] [--count N] [--idle-exit S]", runWatchCommand),
    ("export", "write a room's history: export --server udp://HOST:PORT --room R --format trace > lesson.csv", runExportCommand),
]

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let subcommand = subcommands.first(where: { $0.name == name }) else {
    var usage = "usage: inkwire <command> [options]\n"
    for s in subcommands { usage += "  \(s.name)\t\(s.summary)\n" }
    usage += "servers are udp://HOST:PORT or tcp://HOST:PORT; every client command takes --user NAME, --role teacher|presenter|viewer, --timeout SECONDS\n"
    usage += ClientExit.help + "\n"
    let asked = ["--help", "-h", "help"].contains(arguments.first ?? "")
    FileHandle(fileDescriptor: asked ? 1 : 2).write(Data(usage.utf8))
    exit(asked ? 0 : 2)
}
exit(subcommand.run(Array(arguments.dropFirst())))
