// `inkwire send`: plays a trace into a room as a drawing member, paced like a live sender.
import Foundation
import InkClient
import InkCodec
import InkProtocol
import InkUV

private let sendExtraUsage = "--trace FILE [--speed N]"

func runSendCommand(_ arguments: [String]) -> Int32 {
    guard let (options, flags) = parseClientArguments("send", arguments, extra: ["--trace", "--speed", "--roam-after"],
                                                      extraUsage: sendExtraUsage, defaultRole: .teacher) else {
        return ClientExit.badArguments
    }
    let speed: Double
    let roamAfter: Int?
    let path: String
    do {
        path = try flags.required("--trace")
        speed = try flags.positive("--speed", default: 1)
        roamAfter = try flags.string("--roam-after").map { text throws(UsageError) in
            guard let n = Int(text), n >= 0 else { throw UsageError(description: "--roam-after must be a count of batches") }
            return n
        }
    } catch {
        printError("send", "\(error)")
        return ClientExit.badArguments
    }
    guard let data = FileManager.default.contents(atPath: path) else {
        printError("send", "cannot read \(path)")
        return ClientExit.failure
    }
    let lines: [TraceLine]
    do {
        lines = try Trace.parse([UInt8](data))
    } catch {
        printError("send", "\(path): \(error)")
        return ClientExit.failure
    }
    do {
        let runner = try ClientRunner("send", options: options, configuration: options.configuration())
        let player = try TracePlayer(runner: runner, lines: lines, speed: speed, roamAfter: roamAfter)
        return player.run()
    } catch {
        printError("send", "\(error)")
        return ClientExit.failure
    }
}

/// Sends each batch when its 60 ms window closes (scaled by `speed`), then waits for every
/// acknowledgement. The trace is translated once the board is known, with stroke ids after the
/// user's existing ones: a user who sends again is the same author and continues its strokes.
private final class TracePlayer {
    let runner: ClientRunner
    let lines: [TraceLine]
    private var batches: [Batch] = []
    let speed: Double
    let roamAfter: Int?
    private var next = 0
    private var acked: UInt64 = 0
    private var startedAt: UInt64?
    private let pacer: LoopTimer
    private var roamed = false

    init(runner: ClientRunner, lines: [TraceLine], speed: Double, roamAfter: Int?) throws {
        self.runner = runner
        self.lines = lines
        self.speed = speed
        self.roamAfter = roamAfter
        pacer = try LoopTimer(loop: runner.loop)
    }

    /// When batch `i` is due, in ms of the trace, counted from the first batch's window.
    private func dueMs(_ i: Int) -> UInt64 {
        let window = Batch.liveFlushMs
        let first = (batches[0].commands[0].timeMs / window) * window
        return (batches[i].commands[0].timeMs / window + 1) * window - first
    }

    func run() -> Int32 {
        runner.onEvent = { [unowned self] e in handle(e) }
        return runner.run()
    }

    private func handle(_ e: ClientEvent) {
        if runner.handleCommonEvent(e) { return }
        switch e {
        case .joined(_, _, _, let syncFollows):
            if !syncFollows { start() }
        case .syncDone:
            start()
        case .acknowledged(let originSeq, _):
            acked = max(acked, originSeq)
            if let roamAfter, !roamed, acked >= UInt64(roamAfter) {
                roamed = true
                runner.rebindUDP()
            }
            if acked == UInt64(batches.count) {
                let commands = batches.reduce(0) { $0 + $1.commands.count }
                FileHandle.standardError.write(Data("inkwire send: \(batches.count) batches (\(commands) commands) acknowledged\n".utf8))
                runner.finish(ClientExit.ok)
            } else {
                play()
            }
        case .error(let code, let originSeq, let text):
            runner.fail(ClientExit.refused, "refused (\(code))\(originSeq > 0 ? " batch \(originSeq)" : ""): \(text)")
        default:
            break
        }
    }

    /// Translates the trace for this member and starts playing (once).
    private func start() {
        guard startedAt == nil, let member = runner.session.member else { return }
        var last: UInt32 = 0
        for page in runner.session.board.pages {
            for stroke in runner.session.board.strokes(on: page) where stroke.ref.author == member {
                last = max(last, stroke.ref.stroke.rawValue)
            }
        }
        var translator = LegacyTranslator(author: member, firstStroke: StrokeID(last &+ 1))
        batches = Batch.cut(lines.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }, author: member)
        if batches.isEmpty {
            runner.finish(ClientExit.ok)
            return
        }
        startedAt = runner.loop.now
        play()
    }

    /// Sends every batch that is due, then arms the pacer for the next one.
    private func play() {
        guard let startedAt, runner.exitCode == nil else { return }
        let elapsedMs = Double(runner.loop.now - startedAt) / 1000 * speed
        while next < batches.count && Double(dueMs(next)) <= elapsedMs {
            do {
                try runner.session.send(batches[next].commands, now: runner.now)
            } catch .tooManyPending {
                runner.pump()
                return // resumes on the next acknowledgement
            } catch {
                runner.fail(ClientExit.failure, "batch \(next + 1): \(error)")
                return
            }
            next += 1
        }
        runner.pump()
        if next < batches.count {
            let waitMs = (Double(dueMs(next)) - elapsedMs) / speed
            pacer.start(afterMicroseconds: UInt64(max(0, waitMs) * 1000)) { [unowned self] in play() }
        }
    }
}
