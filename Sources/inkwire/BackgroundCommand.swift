// `inkwire background`: sets a page's background image, or turns a PDF into pages with
// backgrounds (docs/protocol.md 6a): each image is checked here, uploaded once (the daemon
// answers at once for an image it has), then named by a background command.
import Foundation
import InkClient
import InkCodec
import InkCrypto
import InkImage
import InkProtocol

private let backgroundExtraUsage = "(--image FILE [--page N] | --pdf FILE [--page N] [--max-pages N] [--pdf-timeout SECONDS]) [--fit contain|cover|stretch]"

func runBackgroundCommand(_ arguments: [String]) -> Int32 {
    guard let (options, flags) = parseClientArguments("background", arguments,
                                                      extra: ["--image", "--pdf", "--page", "--fit", "--max-pages", "--pdf-timeout"],
                                                      extraUsage: backgroundExtraUsage, defaultRole: .teacher) else {
        return ClientExit.badArguments
    }
    var images: [[UInt8]] = []
    let firstPage: UInt32
    let fit: BackgroundFit
    do {
        firstPage = try flags.string("--page").map { text throws(UsageError) in
            guard let n = UInt32(text), n < UInt32(Board.maxPages) else { throw UsageError(description: "--page must be 0...\(Board.maxPages - 1)") }
            return n
        } ?? 0
        fit = try flags.string("--fit").map { text throws(UsageError) in
            guard let fit = BackgroundFit(name: text) else { throw UsageError(description: "--fit must be contain, cover or stretch") }
            return fit
        } ?? .contain
        switch (flags.string("--image"), flags.string("--pdf")) {
        case (let image?, nil):
            guard let data = FileManager.default.contents(atPath: image) else {
                printError("background", "cannot read \(image)")
                return ClientExit.failure
            }
            images = [[UInt8](data)]
        case (nil, let pdf?):
            var bounds = PDFBounds()
            if let text = flags.string("--max-pages") {
                guard let n = Int(text), n >= 1 else { throw UsageError(description: "--max-pages must be a positive count") }
                bounds.maxPages = n
            }
            bounds.timeoutSeconds = try flags.positive("--pdf-timeout", default: bounds.timeoutSeconds)
            do {
                images = try PDFPages.render(pdf, bounds: bounds)
            } catch {
                printError("background", "\(error)")
                return ClientExit.failure
            }
        default:
            throw UsageError(description: "give --image FILE or --pdf FILE")
        }
    } catch {
        printError("background", "\(error)")
        return ClientExit.badArguments
    }
    guard Int(firstPage) + images.count <= Board.maxPages else {
        printError("background", "\(images.count) pages from page \(firstPage) pass the board's \(Board.maxPages) pages")
        return ClientExit.failure
    }
    var checked: [(BackgroundImage, [UInt8])] = []
    for (i, bytes) in images.enumerated() {
        switch ImageCheck.check(bytes) {
        case .success(let info):
            let hash = BlobHash(OpenSSLCrypto.shared.sha256(bytes))!
            guard let image = BackgroundImage(hash: hash, width: info.width, height: info.height, fit: fit) else {
                printError("background", "image \(i + 1) is \(info.width)x\(info.height) pixels, past \(BackgroundImage.maxSidePixels) a side")
                return ClientExit.failure
            }
            checked.append((image, bytes))
        case .failure(let error):
            printError("background", "image \(i + 1): \(error)")
            return ClientExit.failure
        }
    }
    do {
        var configuration = options.configuration()
        configuration.blobHash = { OpenSSLCrypto.shared.sha256($0) }
        let runner = try ClientRunner("background", options: options, configuration: configuration)
        return BackgroundSetter(runner: runner, images: checked, firstPage: firstPage).run()
    } catch {
        printError("background", "\(error)")
        return ClientExit.failure
    }
}

/// Once the board is known: uploads each image in turn, then sends one batch that adds the
/// missing pages and sets their backgrounds, and exits once it is durable.
private final class BackgroundSetter {
    let runner: ClientRunner
    let images: [(BackgroundImage, [UInt8])]
    let firstPage: UInt32
    private var started = false
    private var stored = 0
    private var sent = false

    init(runner: ClientRunner, images: [(BackgroundImage, [UInt8])], firstPage: UInt32) {
        self.runner = runner
        self.images = images
        self.firstPage = firstPage
    }

    func run() -> Int32 {
        runner.onEvent = { [unowned self] e in handle(e) }
        return runner.run()
    }

    private func handle(_ e: ClientEvent) {
        if runner.handleCommonEvent(e) { return }
        switch e {
        case .joined(_, _, _, let syncFollows):
            if !syncFollows { start() } else if started { uploadNext() }  // a rejoin: upload again what is missing
        case .syncDone:
            if started { uploadNext() } else { start() }
        case .imageStored(let hash, let width, let height):
            guard stored < images.count, images[stored].0.hash == hash else { return }
            if images[stored].0.width != width || images[stored].0.height != height {
                runner.fail(ClientExit.failure, "the daemon reads image \(stored + 1) as \(width)x\(height)")
                return
            }
            stored += 1
            uploadNext()
        case .acknowledged:
            FileHandle.standardError.write(Data("inkwire background: \(images.count) background\(images.count == 1 ? "" : "s") set from page \(firstPage)\n".utf8))
            runner.finish(ClientExit.ok)
        case .error(let code, let originSeq, let text):
            runner.fail(ClientExit.refused, "refused (\(code))\(originSeq > 0 ? " batch \(originSeq)" : ""): \(text)")
        default:
            break
        }
    }

    private func start() {
        guard !started else { return }
        started = true
        uploadNext()
    }

    private func uploadNext() {
        guard !sent else { return }
        if stored < images.count {
            runner.session.uploadImage(images[stored].1, hash: images[stored].0.hash)
            runner.pump()
            return
        }
        let board = runner.session.board
        var commands: [TimedCommand] = []
        for (i, (image, _)) in images.enumerated() {
            let page = PageID(firstPage + UInt32(i))
            if !board.pages.contains(page) { commands.append(TimedCommand(timeMs: 0, command: .addPage(page))) }
            commands.append(TimedCommand(timeMs: 0, command: .background(PageBackground(page: page, image: image))))
        }
        do {
            try runner.session.send(commands, now: runner.now)
            sent = true
        } catch {
            runner.fail(ClientExit.failure, "\(error)")
        }
        runner.pump()
    }
}
