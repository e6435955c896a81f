// `inkwire watch`: joins a room and prints every delivered command, one per line, in room order.
import Foundation
import InkCrypto
import InkImage
import InkClient
import InkCodec
import InkProtocol
import InkUV

private let watchExtraUsage = "[--format legacy|json] [--count N] [--idle-exit SECONDS] [--backgrounds-dir DIR]"

func runWatchCommand(_ arguments: [String]) -> Int32 {
    guard let (options, flags) = parseClientArguments("watch", arguments, extra: ["--format", "--count", "--idle-exit", "--backgrounds-dir"],
                                                      extraUsage: watchExtraUsage, defaultRole: .viewer) else {
        return ClientExit.badArguments
    }
    let json: Bool
    let count: Int?
    let idleSeconds: Double?
    do {
        switch flags.string("--format") ?? "legacy" {
        case "legacy": json = false
        case "json": json = true
        case let other: throw UsageError(description: "--format must be legacy or json, not '\(other)'")
        }
        count = try flags.string("--count").map { text throws(UsageError) in
            guard let n = Int(text), n > 0 else { throw UsageError(description: "--count must be a positive number") }
            return n
        }
        idleSeconds = flags.string("--idle-exit") == nil ? nil : try flags.positive("--idle-exit", default: 1)
    } catch {
        printError("watch", "\(error)")
        return ClientExit.badArguments
    }
    do {
        var configuration = options.configuration()
        let backgroundsDir = flags.string("--backgrounds-dir")
        if backgroundsDir != nil { configuration.blobHash = { OpenSSLCrypto.shared.sha256($0) } }
        let runner = try ClientRunner("watch", options: options, configuration: configuration)
        let watcher = try Watcher(runner: runner, json: json, count: count, idleSeconds: idleSeconds)
        watcher.backgroundsDir = backgroundsDir
        return watcher.run()
    } catch {
        printError("watch", "\(error)")
        return ClientExit.failure
    }
}

private final class Watcher {
    let runner: ClientRunner
    let json: Bool
    let count: Int?
    let idleSeconds: Double?
    private var printed = 0
    private let idleTimer: LoopTimer
    private var out: [UInt8] = []
    /// Where each background image the board names is written, as HASH.jpg or HASH.png.
    var backgroundsDir: String?

    init(runner: ClientRunner, json: Bool, count: Int?, idleSeconds: Double?) throws {
        self.runner = runner
        self.json = json
        self.count = count
        self.idleSeconds = idleSeconds
        idleTimer = try LoopTimer(loop: runner.loop)
    }

    func run() -> Int32 {
        runner.onEvent = { [unowned self] e in
            handle(e)
            flush()
        }
        let code = runner.run()
        flush()
        return code
    }

    private func flush() {
        guard !out.isEmpty else { return }
        do {
            try FileHandle.standardOutput.write(contentsOf: Data(out))
        } catch {
            // The reader went away (`inkwire watch | head`): nothing more to print.
            runner.finish(ClientExit.ok)
        }
        out.removeAll(keepingCapacity: true)
    }

    private func armIdle() {
        guard let idleSeconds else { return }
        idleTimer.start(afterMicroseconds: UInt64(idleSeconds * 1_000_000)) { [unowned self] in
            runner.finish(ClientExit.ok)
        }
    }

    private func handle(_ e: ClientEvent) {
        if runner.handleCommonEvent(e) { return }
        switch e {
        case .joined:
            armIdle()
        case .delivered(let batch):
            guard runner.exitCode == nil else { return }
            armIdle()
            for timed in batch.commands {
                if json {
                    emit(jsonLine(batch, timed))
                } else if let text = LegacyMessage(transcribing: timed.command) {
                    // Commands with no legacy text (erase, pages, room) show in --format json only.
                    emit(text.bytes)
                }
                if runner.exitCode != nil { return }
            }
        case .syncDone(let roomSeq, let digest, let matches):
            let hex = String(digest, radix: 16)
            printError("watch", "synced through roomSeq \(roomSeq), board digest \(hex) \(matches ? "matches the server" : "DOES NOT MATCH the server")")
        case .error(let code, _, let text):
            printError("watch", "refused (\(code)): \(text)")
        case .background(let hash, let bytes):
            armIdle()
            guard let dir = backgroundsDir else { return }
            let path = dir + "/" + hash.hex + "." + (ImageCheck.format(of: bytes)?.fileExtension ?? "bin")
            if FileManager.default.createFile(atPath: path, contents: Data(bytes)) {
                printError("watch", "background \(hash.hex) (\(bytes.count) bytes) saved as \(path)")
            } else {
                printError("watch", "cannot write \(path)")
            }
        case .backgroundFailed(let hash, let reason):
            printError("watch", "background \(hash.hex) not received: \(reason)")
        default:
            break
        }
    }

    private func emit(_ line: [UInt8]) {
        guard runner.exitCode == nil else { return }
        out += line
        out.append(UInt8(ascii: "\n"))
        printed += 1
        if let count, printed >= count { runner.finish(ClientExit.ok) }
    }
}

/// One command as a JSON object on one line.
func jsonLine(_ batch: DeliveredBatch, _ timed: TimedCommand) -> [UInt8] {
    var fields = "\"roomSeq\":\(batch.roomSeq),\"author\":\(batch.author.rawValue),\"t\":\(timed.timeMs)"
    switch timed.command {
    case .point(let p):
        fields += ",\"cmd\":\"point\",\"stroke\":\(p.stroke.rawValue),\"tool\":\"\(p.tool == .pen ? "pen" : "eraser")\""
        fields += ",\"phase\":\"\(p.phase == .start ? "start" : p.phase == .move ? "move" : "end")\",\"x\":\(p.x),\"y\":\(p.y)"
    case .penStyle(let s): fields += ",\"cmd\":\"penStyle\",\"color\":\(s.color),\"width\":\(s.width)"
    case .undo(let s): fields += ",\"cmd\":\"undo\",\"stroke\":\(s.rawValue)"
    case .redo(let s): fields += ",\"cmd\":\"redo\",\"stroke\":\(s.rawValue)"
    case .clear: fields += ",\"cmd\":\"clear\""
    case .erase(let r): fields += ",\"cmd\":\"erase\",\"strokeAuthor\":\(r.author.rawValue),\"stroke\":\(r.stroke.rawValue)"
    case .addPage(let p): fields += ",\"cmd\":\"addPage\",\"page\":\(p.rawValue)"
    case .switchPage(let p): fields += ",\"cmd\":\"switchPage\",\"page\":\(p.rawValue)"
    case .room(let r):
        switch r {
        case .lock: fields += ",\"cmd\":\"lock\""
        case .unlock: fields += ",\"cmd\":\"unlock\""
        case .presentPage(let p): fields += ",\"cmd\":\"presentPage\",\"page\":\(p.rawValue)"
        }
    case .background(let b):
        fields += ",\"cmd\":\"background\",\"page\":\(b.page.rawValue)"
        if let image = b.image {
            fields += ",\"image\":\"\(image.hash.hex)\",\"width\":\(image.width),\"height\":\(image.height),\"fit\":\"\(image.fit.name)\""
        }
    case .unknown(let kind, let payload): fields += ",\"cmd\":\"unknown\",\"kind\":\(kind.rawValue),\"bytes\":\(payload.count)"
    }
    if batch.fromSync { fields += ",\"sync\":true" }
    return Array("{\(fields)}".utf8)
}
