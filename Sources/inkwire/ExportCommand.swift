// `inkwire export`: writes a room's history, with its original times, in the trace format; or
// draws its board (a page, at the end or at a time of the lesson) as SVG or PNG, the way the
// app and the web page draw it (InkCodec.BoardSVG; PNG through Debian's rsvg-convert).
import Foundation
import InkCrypto
import InkImage
import InkWeb
import InkClient
import InkCodec
import InkProtocol

private let exportExtraUsage = "--format trace|svg|png [--page N] [--at TIME] [--width PX] [--out FILE]"

/// What `export` writes.
private enum ExportFormat: String {
    case trace, svg, png
}

/// How `--format svg|png` draws.
private struct PictureOptions {
    var page: PageID?
    /// Lesson time (the trace's times): fold only commands up to it.
    var atMs: UInt64?
    var width = 1024
    var out: String?
}

func runExportCommand(_ arguments: [String]) -> Int32 {
    guard let (options, flags) = parseClientArguments("export", arguments, extra: ["--format", "--page", "--at", "--width", "--out"],
                                                      extraUsage: exportExtraUsage, defaultRole: .viewer) else {
        return ClientExit.badArguments
    }
    guard let format = ExportFormat(rawValue: flags.string("--format") ?? "trace") else {
        printError("export", "--format must be trace, svg or png")
        return ClientExit.badArguments
    }
    var picture = PictureOptions()
    if let page = flags.string("--page") {
        guard let n = UInt32(page) else { printError("export", "--page must be a page number (0 is the first page)"); return ClientExit.badArguments }
        picture.page = PageID(n)
    }
    if let at = flags.string("--at") {
        guard let ms = lessonTime(at) else { printError("export", "--at must be a lesson time: 95000 (ms), 95s, 12m or 1h"); return ClientExit.badArguments }
        picture.atMs = ms
    }
    if let width = flags.string("--width") {
        guard let n = Int(width), (16...16384).contains(n) else { printError("export", "--width must be 16 to 16384 pixels"); return ClientExit.badArguments }
        picture.width = n
    }
    picture.out = flags.string("--out")
    if format == .trace, picture.page != nil || picture.atMs != nil {
        printError("export", "--page and --at are for --format svg or png")
        return ClientExit.badArguments
    }
    if format == .png, rasterizer == nil {
        printError("export", "--format png needs rsvg-convert (Debian: apt install librsvg2-bin); --format svg needs nothing")
        return ClientExit.badArguments
    }
    var configuration = options.configuration()
    // Ask for the whole log as a tail (every batch with its author's times), not a snapshot.
    configuration.initialHave = .upTo(roomSeq: 0, digest: 0)
    // Pictures draw the page's background image: fetched once the history is in.
    if format != .trace { configuration.blobHash = { OpenSSLCrypto.shared.sha256($0) } }
    do {
        let runner = try ClientRunner("export", options: options, configuration: configuration)
        return Exporter(runner: runner, format: format, picture: picture).run()
    } catch {
        printError("export", "\(error)")
        return ClientExit.failure
    }
}

/// Collects the sync's batches and writes them as trace lines once `syncDone` arrives.
private final class Exporter {
    let runner: ClientRunner
    private let format: ExportFormat
    private let picture: PictureOptions
    private var out: [UInt8] = []
    private var lastTimeMs: UInt64 = 0
    private var skipped = 0
    private var lines = 0
    /// The board as folded so far (for svg and png), up to `--at` when given.
    private var board = Board()
    private var sawSnapshot = false
    /// The picture's background image, awaited after the history.
    private var waitingFor: BlobHash?

    init(runner: ClientRunner, format: ExportFormat, picture: PictureOptions) {
        self.runner = runner
        self.format = format
        self.picture = picture
    }

    func run() -> Int32 {
        runner.onEvent = { [unowned self] e in handle(e) }
        let code = runner.run()
        guard code == ClientExit.ok else { return code }
        if format != .trace {
            let page = picture.page ?? board.presentedPage ?? .first
            guard board.pages.contains(page) else {
                printError("export", "the board has no page \(page.rawValue) (pages: \(board.pages.map { String($0.rawValue) }.joined(separator: ", ")))")
                return ClientExit.failure
            }
            var background: (image: BackgroundImage, href: String)?
            if let image = board.backgrounds[page], let bytes = runner.session.background(image.hash) {
                let mime = ImageCheck.format(of: bytes)?.mimeType ?? "image/jpeg"
                background = (image, "data:\(mime);base64," + Base64.encode(bytes))
            }
            let svg = BoardSVG.document(board.strokes(on: page), width: picture.width, height: picture.width * 3 / 4,
                                        title: "page \(page.rawValue)" + (picture.atMs.map { " at \($0) ms" } ?? ""), background: background)
            out = Array(svg.utf8)
            if format == .png {
                guard let png = rasterize(out) else { return ClientExit.failure }
                out = png
            }
        }
        do {
            if let path = picture.out {
                try Data(out).write(to: URL(fileURLWithPath: path))
            } else {
                try FileHandle.standardOutput.write(contentsOf: Data(out))
            }
        } catch {
            printError("export", "cannot write the \(format.rawValue): \(error)")
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
                sawSnapshot = true
                printError("export", picture.atMs != nil
                    ? "warning: the server no longer holds the whole log in memory; --at is not possible, drawing the board as it is now"
                    : "warning: the server no longer holds the whole log in memory; exporting the board without its times")
            }
        case .delivered(let batch):
            guard batch.fromSync else { return }
            if format != .trace {
                for timed in batch.commands {
                    lastTimeMs = max(lastTimeMs, timed.timeMs)
                    if let at = picture.atMs, !sawSnapshot, lastTimeMs > at { continue }
                    board.apply(timed.command, author: batch.author)
                    lines += 1
                }
                return
            }
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
            let page = picture.page ?? board.presentedPage ?? .first
            if format != .trace, let image = board.backgrounds[page], runner.session.background(image.hash) == nil {
                waitingFor = image.hash  // the picture needs the page's background: it comes after the strokes
                return
            }
            runner.finish(ClientExit.ok)
        case .background(let hash, _):
            if hash == waitingFor { runner.finish(ClientExit.ok) }
        case .backgroundFailed(let hash, let reason):
            if hash == waitingFor {
                printError("export", "warning: the page's background image \(hash.hex) could not be had (\(reason)): drawn without it")
                runner.finish(ClientExit.ok)
            }
        case .error(let code, _, let text):
            runner.fail(ClientExit.refused, "refused (\(code)): \(text)")
        default:
            break
        }
    }
}

/// `95000` (ms), `95s`, `12m`, `1h`.
private func lessonTime(_ text: String) -> UInt64? {
    let units: [Character: UInt64] = ["s": 1000, "m": 60_000, "h": 3_600_000]
    var digits = Substring(text)
    var scale: UInt64 = 1
    if text.hasSuffix("ms") {
        digits = digits.dropLast(2)
    } else if let last = digits.last, let unit = units[last] {
        scale = unit
        digits = digits.dropLast()
    }
    guard let value = UInt64(digits), value <= UInt64.max / scale else { return nil }
    return value * scale
}

/// rsvg-convert (librsvg2-bin), if installed.
private let rasterizer: String? = ["/usr/bin/rsvg-convert", "/usr/local/bin/rsvg-convert"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// SVG bytes as PNG, through rsvg-convert.
private func rasterize(_ svg: [UInt8]) -> [UInt8]? {
    guard let rasterizer else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: rasterizer)
    process.arguments = ["--format", "png"]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    do { try process.run() } catch {
        printError("export", "cannot run \(rasterizer): \(error)")
        return nil
    }
    // Write from another thread so a large picture cannot fill both pipes.
    let writer = Thread {
        input.fileHandleForWriting.write(Data(svg))
        try? input.fileHandleForWriting.close()
    }
    writer.start()
    let png = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        printError("export", "\(rasterizer) failed (exit \(process.terminationStatus))")
        return nil
    }
    return [UInt8](png)
}
