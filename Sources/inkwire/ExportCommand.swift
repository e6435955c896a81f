// `inkwire export`: writes a room's history, with its original times, in the trace format.
import Foundation
import InkClient
import InkCodec
import InkProtocol

private let exportExtraUsage = "--format trace"

func runExportCommand(_ arguments: [String]) -> Int32 {
    guard let (options, flags) = parseClientArguments("export", arguments, extra: ["--format"],
                                                      extraUsage: exportExtraUsage, defaultRole: .viewer) else {
        return ClientExit.badArguments
    }
    guard (flags.string("--format") ?? "trace") == "trace" else {
        printError("export", "--format must be trace")
        return ClientExit.badArguments
    }
    var configuration = options.configuration()
    // Ask for the whole log as a tail (every batch with its author's times), not a snapshot.
    configuration.initialHave = .upTo(roomSeq: 0, digest: 0)
    do {
        let runner = try ClientRunner("export", options: options, configuration: configuration)
        return Exporter(runner: runner).run()
    } catch {
        printError("export", "\(error)")
        return ClientExit.failure
    }
}

/// Collects the sync's batches and writes them as trace lines once `syncDone` arrives.
private final class Exporter {
    let runner: ClientRunner
    private var out: [UInt8] = []
    private var lastTimeMs: UInt64 = 0
    private var skipped = 0
    private var lines = 0

    init(runner: ClientRunner) { self.runner = runner }

    func run() -> Int32 {
        runner.onEvent = { [unowned self] e in handle(e) }
        let code = runner.run()
        guard code == ClientExit.ok else { return code }
        do {
            try FileHandle.standardOutput.write(contentsOf: Data(out))
        } catch {
            printError("export", "cannot write the trace: \(error)")
            return ClientExit.failure
        }
        return code
    }

    private func handle(_ e: ClientEvent) {
        if runner.handleCommonEvent(e) { return }
        switch e {
        case .joined(_, _, let head, let syncFollows):
            if !syncFollows {
                if head > 0 { printError("export", "warning: the server sent no history for a room at \(head)") }
                runner.finish(ClientExit.ok)
            }
        case .syncStarted(let begin):
            if begin.mode == .snapshot {
                printError("export", "warning: the server no longer holds the whole log in memory; exporting the board without its times")
            }
        case .delivered(let batch):
            guard batch.fromSync else { return }
            for timed in batch.commands {
                guard let message = LegacyMessage(transcribing: timed.command) else {
                    skipped += 1
                    continue
                }
                // A trace's times never decrease; several authors' clocks may disagree.
                lastTimeMs = max(lastTimeMs, timed.timeMs)
                Trace.append(TraceLine(timeMs: lastTimeMs, message: message), to: &out)
                lines += 1
            }
        case .syncDone(let roomSeq, _, let matches):
            guard matches else {
                runner.fail(ClientExit.failure, "the history through \(roomSeq) does not fold to the server's digest")
                return
            }
            var note = "inkwire export: \(lines) commands through roomSeq \(roomSeq)"
            if skipped > 0 { note += " (\(skipped) without a trace form skipped)" }
            FileHandle.standardError.write(Data((note + "\n").utf8))
            runner.finish(ClientExit.ok)
        case .error(let code, _, let text):
            runner.fail(ClientExit.refused, "refused (\(code)): \(text)")
        default:
            break
        }
    }
}
