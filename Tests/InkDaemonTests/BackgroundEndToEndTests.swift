import Glibc
import InkCodec
import InkCrypto
import InkImage
import Testing

/// Board backgrounds through the real `inkwired` and `inkwire` on loopback: a legacy app's
/// upload, native watchers, a late joiner, a restart, a PDF, and hostile uploads.
@Suite struct BackgroundEndToEndTests {
    static func start(_ tag: String, extra: [String] = [], dataDir: String? = nil) throws -> (DaemonProcess, tcp: String, upload: UInt16) {
        let process = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy-upload", "127.0.0.1:0=maths"] + extra,
                                        dataDir: dataDir, tag: tag)
        let fields = try process.ready()
        let upload = DaemonProcess.port(fields["legacy_upload"].map { String($0.split(separator: "=")[0]) })!
        return (process, "tcp://" + fields["tcp"]!, upload)
    }

    static func photo(seed: UInt64, width: Int = 640, height: Int = 480) -> [UInt8] {
        ImageEncode.jpeg(rgb: ImageEncode.testPattern(width: width, height: height, seed: seed), width: width, height: height)!
    }

    static func hex(_ bytes: [UInt8]) -> String { BlobHash(OpenSSLCrypto.shared.sha256(bytes))!.hex }

    /// Sends `bytes` to the upload port as an app would and waits until the daemon closes.
    static func upload(_ bytes: [UInt8], port: UInt16, closeEarly: Bool = false) throws {
        let fd = try connectLoopback(port: port, type: SOCK_STREAM)
        defer { close(fd) }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }
            sent += n
        }
        if closeEarly { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        while recv(fd, &buffer, buffer.count, 0) > 0 {}  // heartbeats, then the close
    }

    static func frames(_ frames: [LegacyFrame]) -> [UInt8] {
        var out: [UInt8] = []
        for f in frames { f.append(to: &out) }
        return out
    }

    static func watch(_ tcp: String, dir: String, name: String, room: String = "maths") throws -> ClientProcess {
        let images = dir + "/" + name
        mkdir(images, 0o700)
        return try ClientProcess.run(["watch", "--server", tcp, "--room", room, "--user", name, "--format", "json", "--idle-exit", "2",
                                      "--backgrounds-dir", images], directory: dir)
    }

    @Test func aLegacyUploadReachesWatchersLateJoinersAndSurvivesARestart() throws {
        // A directory of the test's, so the restarted daemon finds the first one's data.
        let dir = DaemonProcess.scratchDirectory("bg-legacy")
        defer { removeTree(dir) }
        var (d, tcp, port) = try Self.start("bg-legacy", dataDir: dir)
        let jpeg = Self.photo(seed: 1)
        let live = try ClientProcess(["watch", "--server", tcp, "--room", "maths", "--user", "early", "--format", "json", "--idle-exit", "4",
                                      "--backgrounds-dir", dir], directory: dir)
        #expect(ClientEndToEndTests.waitJoined(.init(process: d, udp: "", tcp: tcp, legacyPort: 0), room: "maths", user: "early"))
        try Self.upload(Self.frames(LegacyUploadSender.frames(for: jpeg)), port: port)
        #expect(d.waitForLine(containing: "legacy upload stored as the background") != nil, "\(d.log)")
        #expect(live.wait() == 0, "\(live.errors)")
        let name = Self.hex(jpeg)
        #expect(readFile(dir + "/\(name).jpg") == jpeg, "the early watcher got exactly the image")
        #expect(live.output.contains("\"cmd\":\"background\",\"page\":0,\"image\":\"\(name)\",\"width\":640,\"height\":480"))

        let late = try Self.watch(tcp, dir: dir, name: "late")
        #expect(late.exitStatus == 0, "\(late.errors)")
        #expect(readFile(dir + "/late/\(name).jpg") == jpeg, "a late joiner gets it after the board")

        d.signal(SIGTERM)
        #expect(d.waitExit() == 0)
        (d, tcp, port) = try Self.start("bg-legacy", dataDir: dir)
        let after = try Self.watch(tcp, dir: dir, name: "after-restart")
        #expect(after.exitStatus == 0, "\(after.errors)")
        #expect(readFile(dir + "/after-restart/\(name).jpg") == jpeg, "the restarted daemon keeps it")
        d.signal(SIGTERM)
        _ = d.waitExit()
    }

    /// Truncated, wrong length, not an image, over the limit: each refused (the connection
    /// closed, a log line), nothing stored, and the room goes on.
    @Test func hostileUploadsAreRefusedAndTheRoomKeepsWorking() throws {
        let (d, tcp, port) = try Self.start("bg-hostile", extra: ["--max-background-bytes", "65536"])
        let dir = d.dataDir
        let small = Self.photo(seed: 2, width: 320, height: 240)
        #expect(small.count < 65536)
        let good = LegacyUploadSender.frames(for: small)
        // Truncated: the app goes away after half the chunks.
        try Self.upload(Self.frames(Array(good.prefix(good.count / 2))), port: port, closeEarly: true)
        // (A FIN, or a reset when the daemon's heartbeat was still unread: either ends it.)
        #expect(d.waitForLine(containing: "msg=\"legacy upload refused\"") != nil)
        #expect(d.log.contains("the app closed before the upload completed") || d.log.contains("read failed"))
        // Wrong length: 102 before every announced byte; and more bytes than announced.
        try Self.upload(Self.frames(good.enumerated().filter { $0.offset != 2 }.map(\.element)), port: port)
        #expect(d.waitForLine(containing: "completed after") != nil)
        try Self.upload(Self.frames([good[0], good[1], good[1]] + Array(good.dropFirst(1))), port: port)
        #expect(d.waitForLine(containing: "more than the announced") != nil)
        // Not an image: framed right, bytes of a text.
        try Self.upload(Self.frames(LegacyUploadSender.frames(for: Array(String(repeating: "not a jpeg ", count: 300).utf8))), port: port)
        #expect(d.waitForLine(containing: "not a JPEG or PNG image") != nil)
        // A JPEG cut short but framed with its cut length.
        try Self.upload(Self.frames(LegacyUploadSender.frames(for: Array(small.prefix(small.count - 300)))), port: port)
        #expect(d.waitForLine(containing: "jpeg does not decode") != nil)
        // Over the limit.
        try Self.upload(Self.frames(LegacyUploadSender.frames(for: Self.photo(seed: 3, width: 1600, height: 1200))), port: port)
        #expect(d.waitForLine(containing: "is not 1...65536 bytes") != nil)
        #expect(!d.log.contains("background image stored"), "nothing stored")

        // The room goes on: a good upload and a native one.
        try Self.upload(Self.frames(good), port: port)
        #expect(d.waitForLine(containing: "legacy upload stored as the background") != nil)
        let other = Self.photo(seed: 4, width: 200, height: 150)
        writeFile(dir + "/other.jpg", other)
        let set = try ClientProcess.run(["background", "--server", tcp, "--room", "maths", "--user", "t", "--image", dir + "/other.jpg", "--page", "0"],
                                        directory: dir)
        #expect(set.exitStatus == 0, "\(set.errors)")
        let w = try Self.watch(tcp, dir: dir, name: "w")
        #expect(w.exitStatus == 0)
        #expect(readFile(dir + "/w/\(Self.hex(other)).jpg") == other)
        #expect(w.output.contains("\"image\":\"\(Self.hex(small))\""), "the history keeps the first background too")
        d.signal(SIGTERM)
        _ = d.waitExit()
    }

    @Test func aPDFOfThreePagesBecomesThreePagesWithBackgrounds() throws {
        guard access("/usr/bin/pdftoppm", X_OK) == 0 else {
            print("BackgroundEndToEndTests: pdftoppm (poppler-utils) not installed; skipped")
            return
        }
        let (d, tcp, _) = try Self.start("bg-pdf")
        let dir = d.dataDir
        writeFile(dir + "/three.pdf", PDFMaker.pages(3))
        let set = try ClientProcess.run(["background", "--server", tcp, "--room", "maths", "--user", "t", "--pdf", dir + "/three.pdf"], directory: dir)
        #expect(set.exitStatus == 0, "\(set.errors)")
        let w = try Self.watch(tcp, dir: dir, name: "pages")
        #expect(w.exitStatus == 0, "\(w.errors)")
        let backgrounds = w.outputLines.filter { $0.contains("\"cmd\":\"background\"") }
        #expect(backgrounds.count == 3)
        for page in 0..<3 { #expect(backgrounds.contains { $0.contains("\"page\":\(page),") && $0.contains("\"width\":2000,\"height\":1500") }, "page \(page)") }
        let files = (try? listDirectory(dir + "/pages")) ?? []
        #expect(files.count == 3)
        for file in files {
            #expect(ImageCheck.check(readFile(dir + "/pages/" + file)) == .success(ImageInfo(format: .jpeg, width: 2000, height: 1500)))
        }
        d.signal(SIGTERM)
        _ = d.waitExit()
    }

    /// PDF bombs: too many pages is refused before rendering; a page that would paint 10^8
    /// shapes (nested forms) is killed at the time bound. The client exits 1; nothing is sent.
    @Test func pdfBombsAreRefused() throws {
        guard access("/usr/bin/pdftoppm", X_OK) == 0 else { return }
        let dir = DaemonProcess.scratchDirectory("bg-bomb")
        defer { removeTree(dir) }
        writeFile(dir + "/many.pdf", PDFMaker.pages(150))
        let many = try ClientProcess.run(["background", "--server", "tcp://127.0.0.1:9", "--room", "maths", "--pdf", dir + "/many.pdf"], directory: dir)
        #expect(many.exitStatus == 1)
        #expect(many.errors.contains("has 150 pages, more than 100"), "\(many.errors)")
        writeFile(dir + "/nested.pdf", PDFMaker.nestedForms(depth: 8, fanOut: 10))
        let started = monotonicMicroseconds()
        let nested = try ClientProcess.run(["background", "--server", "tcp://127.0.0.1:9", "--room", "maths", "--pdf", dir + "/nested.pdf",
                                            "--pdf-timeout", "3"], directory: dir)
        #expect(nested.exitStatus == 1, "\(nested.errors)")
        #expect(nested.errors.contains("pdftoppm"), "\(nested.errors)")
        #expect(monotonicMicroseconds() - started < 20_000_000)
    }
}

func removeTree(_ path: String) {
    if path.hasPrefix("/tmp/inkwired-test-") { _ = system("rm -rf '\(path)'") }
}

func listDirectory(_ path: String) throws -> [String] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
}

/// Small PDFs written by hand (objects, a cross-reference table, a trailer).
enum PDFMaker {
    static func document(_ objects: [String]) -> [UInt8] {
        var out = Array("%PDF-1.4\n".utf8)
        var offsets: [Int] = []
        for (i, body) in objects.enumerated() {
            offsets.append(out.count)
            out += Array("\(i + 1) 0 obj\n\(body)\nendobj\n".utf8)
        }
        let xref = out.count
        var table = "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        for o in offsets {
            let digits = String(o)
            table += String(repeating: "0", count: 10 - digits.count) + digits + " 00000 n \n"
        }
        out += Array((table + "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n").utf8)
        return out
    }

    static func stream(_ content: String, dictionary: String = "") -> String {
        "<< \(dictionary) /Length \(content.utf8.count) >>\nstream\n\(content)\nendstream"
    }

    /// `count` 400 x 300 pt pages, page k with a rectangle k wide.
    static func pages(_ count: Int) -> [UInt8] {
        var objects = ["<< /Type /Catalog /Pages 2 0 R >>",
                       "<< /Type /Pages /Kids [\((0..<count).map { "\(3 + 2 * $0) 0 R" }.joined(separator: " "))] /Count \(count) >>"]
        for k in 0..<count {
            objects.append("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 300] /Contents \(4 + 2 * k) 0 R >>")
            objects.append(stream("0.2 0.5 0.8 rg 20 20 \(50 + (k % 300)) 200 re f"))
        }
        return document(objects)
    }

    /// One page whose content draws form 1 `fanOut` times, which draws form 2 `fanOut` times...
    /// down to `depth`: fanOut^depth rectangles from a file of a few kilobytes.
    static func nestedForms(depth: Int, fanOut: Int) -> [UInt8] {
        // 1 catalog, 2 pages, 3 page, 4 content, 5... forms.
        var objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                       "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 300] /Contents 4 0 R /Resources << /XObject << /F 5 0 R >> >> >>",
                       stream(String(repeating: "/F Do ", count: fanOut))]
        for level in 0..<depth {
            let last = level == depth - 1
            let content = last ? "0 0 1 1 re f" : String(repeating: "/F Do ", count: fanOut)
            let resources = last ? "" : "/Resources << /XObject << /F \(6 + level) 0 R >> >>"
            objects.append(stream(content, dictionary: "/Type /XObject /Subtype /Form /BBox [0 0 400 300] \(resources)"))
        }
        return document(objects)
    }
}
