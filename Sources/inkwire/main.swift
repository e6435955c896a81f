// inkwire: the command-line client. Each subcommand lives in its own file; add one entry here.
import Foundation
import InkVersion

struct Subcommand {
    let name: String
    let summary: String
    /// The usage line and what the options mean (`inkwire NAME --help`).
    let help: String
    let run: ([String]) -> Int32
}

let clientOptionsHelp = """
      --server URL      udp://HOST:PORT or tcp://HOST:PORT; HOST is an IPv4 address, [IPv6] or a host name
                        (resolved by the system resolver; each address is tried in turn until one answers)
      --room NAME       the room
      --user NAME       your name in the room (default $USER)
      --role ROLE       teacher | presenter | viewer
      --token-file FILE join token (the file's first line), when the daemon has --token-secret-file;
                        or INKWIRE_TOKEN in the environment (inkwire token mints one)
      --token TOKEN     the token on the command line instead (others on the machine see it in ps)
      --timeout SECONDS how long to wait for the join to be answered (default 5)
    Options take --name value or --name=value.
    """

let subcommands: [Subcommand] = [
    Subcommand(name: "send", summary: "play a trace into a room as a drawing member", help: """
        usage: inkwire send --server URL --room NAME [--user NAME] [--role teacher|presenter] [--token-file FILE] --trace FILE [--speed N]
        Plays the trace (t_ms,<command> lines; inkwire demo-trace makes one) into the room, paced as it was
        drawn (--speed 20: twenty times faster; default role teacher), and exits 0 once every batch is durable.
        \(clientOptionsHelp)
          --trace FILE      the trace to play
          --speed N         playback speed factor (default 1)
        """, run: runSendCommand),
    Subcommand(name: "watch", summary: "print a room's commands as they arrive", help: """
        usage: inkwire watch --server URL --room NAME [--format legacy|json] [--count N] [--idle-exit SECONDS] [--backgrounds-dir DIR]
        Joins as a viewer, gets the whole board first (its digest is checked), then prints every command in
        room order: the app's CSV text (legacy) or one JSON object per line.
        \(clientOptionsHelp)
          --format FORMAT   legacy (default) or json
          --count N         exit 0 after N commands
          --idle-exit S     exit 0 after S seconds without a command
          --backgrounds-dir DIR  fetch the board's background images (after the strokes) and write each
                            as DIR/SHA256.jpg or .png
        """, run: runWatchCommand),
    Subcommand(name: "export", summary: "write a room's whole history as a trace", help: """
        usage: inkwire export --server URL --room NAME [--format trace] > lesson.csv
        Writes every stored batch of the room with its original times (a room kept with --retain full on the
        daemon; a compacted room gives its board).
        \(clientOptionsHelp)
          --format trace    the only format (default)
        """, run: runExportCommand),
    Subcommand(name: "background", summary: "set a page's background image, or make pages of a PDF's", help: """
        usage: inkwire background --server URL --room NAME [--role teacher|presenter] --image FILE [--page N] [--fit FIT]
               inkwire background --server URL --room NAME --pdf FILE [--page N] [--max-pages N] [--pdf-timeout S]
        Sets the background of board page N (default 0) to a JPEG or PNG image, drawn under the strokes, and
        exits 0 once it is durable. With --pdf, PDF page k becomes board page N+k-1 (added if missing) with the
        page rendered as its background (Debian's poppler-utils, in a separate process, bounded in pages,
        pixels, memory and time). The daemon stores each image once (--max-background-bytes, a room quota).
        \(clientOptionsHelp)
          --image FILE      a JPEG or PNG
          --pdf FILE        a PDF (at most --max-pages pages, default 100; each rendered within --pdf-timeout
                            seconds, default 60)
          --page N          the (first) board page (default 0)
          --fit FIT         contain (default: the whole image, centred), cover (fills the page) or stretch
        """, run: runBackgroundCommand),
    Subcommand(name: "token", summary: "mint a join token with the daemon's token secret", help: tokenUsage, run: runTokenCommand),
    Subcommand(name: "codec", summary: "convert whiteboard data between trace, legacy and binary forms", help: codecUsage, run: runCodecCommand),
    Subcommand(name: "demo-trace", summary: "write a made-up lesson trace (for trying inkwire send)", help: demoTraceUsage, run: runDemoTraceCommand),
]

@MainActor func mainHelp() -> String {
    var text = """
        inkwire \(InkwireVersion.string): the Inkwire command-line client.

        usage: inkwire <command> [options]      inkwire <command> --help      inkwire --version

        commands:

        """
    for s in subcommands { text += "  " + s.name.padding(toLength: 12, withPad: " ", startingAt: 0) + s.summary + "\n" }
    text += "\n" + ClientExit.help + "\n"
    return text
}

let arguments = Array(CommandLine.arguments.dropFirst())
let first = arguments.first ?? ""
switch first {
case "--version":
    print("inkwire \(InkwireVersion.string) (commit \(InkwireVersion.commit))")
    exit(0)
case "--help", "-h":
    print(mainHelp(), terminator: "")
    exit(0)
case "help":
    // `inkwire help send` is `inkwire send --help`.
    if arguments.count > 1, let s = subcommands.first(where: { $0.name == arguments[1] }) {
        print(s.help, terminator: s.help.hasSuffix("\n") ? "" : "\n")
    } else {
        print(mainHelp(), terminator: "")
    }
    exit(0)
default:
    break
}
guard let subcommand = subcommands.first(where: { $0.name == first }) else {
    FileHandle.standardError.write(Data(((first.isEmpty ? "" : "inkwire: unknown command '\(first)'\n") + mainHelp()).utf8))
    exit(ClientExit.badArguments)
}
let rest = Array(arguments.dropFirst())
if rest.contains("--version") {
    print("inkwire \(InkwireVersion.string) (commit \(InkwireVersion.commit))")
    exit(0)
}
if rest.contains("-h") || rest.contains("--help") {
    print(subcommand.help, terminator: subcommand.help.hasSuffix("\n") ? "" : "\n")
    exit(0)
}
exit(subcommand.run(rest))
