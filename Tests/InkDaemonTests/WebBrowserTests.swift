import Foundation
import Glibc
import InkBenchSupport
import InkCodec
@testable import InkDaemon
import InkProtocol
import LegacyAppModel
import Testing

/// The real inkwired and Debian's headless Chromium on loopback: pages draw with pointer events
/// (mouse input through the DevTools protocol) and the room, a second page, a native device and
/// a legacy device must see exactly those strokes. Skipped where chromium is not installed.
/// The legacy device is the HYWhiteboard app model (`LegacyAppModel`), compared by its screen.
@Suite(.serialized, .enabled(if: Chromium.binary != nil, "chromium is not installed"))
struct WebBrowserTests {
    struct Daemon {
        let process: DaemonProcess
        let fields: [String: String]
        var web: UInt16 { DaemonProcess.port(fields["web"])! }
        var tcp: UInt16 { DaemonProcess.port(fields["tcp"])! }
        func url(_ path: String) -> String { "http://127.0.0.1:\(web)\(path)" }
    }

    static func startDaemon(_ tag: String, extra: [String] = []) throws -> Daemon {
        // The legacy app model sends its heartbeats only while the test runs it (between browser
        // steps): give it a silence bound the test (a browser on a loaded host) cannot reach,
        // instead of the app's 9 s.
        let process = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--web", "127.0.0.1:0", "--legacy", "127.0.0.1:0=r",
                                         "--legacy-timeout-ms", "300000"] + extra, tag: tag)
        return Daemon(process: process, fields: try process.ready())
    }

    /// Opens a board page and waits until it has joined and applied the room's history.
    static func openBoard(_ browser: Chromium, _ daemon: Daemon, room: String, fragment: String) throws -> BrowserPage {
        let page = try browser.open(daemon.url("/room/\(room)#\(fragment)"))
        try #require(page.wait(for: "window.inkwireBoard && window.inkwireBoard.member !== null && !window.inkwireBoard.session.follower.syncing"),
                     "the page did not join: \(String(describing: try? page.evaluate("document.body.innerText")))")
        return page
    }

    /// The canvas's rectangle in page coordinates.
    static func canvasRect(_ page: BrowserPage) throws -> (x: Double, y: Double, width: Double, height: Double) {
        let json = try page.evaluate("JSON.stringify(document.getElementById('board').getBoundingClientRect())") as? String ?? "{}"
        let r = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Double] ?? [:]
        return (r["x"] ?? 0, r["y"] ?? 0, r["width"] ?? 0, r["height"] ?? 0)
    }

    /// Draws a stroke through `points` (fractions of the canvas) with mouse events, a few
    /// animation frames apart so it travels as several live batches.
    static func draw(_ page: BrowserPage, _ points: [(Double, Double)]) throws {
        try page.bringToFront()
        let r = try canvasRect(page)
        for (i, p) in points.enumerated() {
            let x = r.x + p.0 * r.width
            let y = r.y + p.1 * r.height
            try page.mouse(i == 0 ? "mousePressed" : "mouseMoved", x: x, y: y)
            if i % 3 == 2 { usleep(20_000) }
        }
        let last = points[points.count - 1]
        try page.mouse("mouseReleased", x: r.x + last.0 * r.width, y: r.y + last.1 * r.height)
    }

    static func click(_ page: BrowserPage, _ selector: String) throws {
        try page.bringToFront()
        _ = try page.evaluate("document.querySelector(\(quoted(selector))).click()")
    }

    static func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "\\'") + "'" }

    /// The commands a page sent, one line each (`t:type:stroke:tool:phase:x:y:color:width:page`).
    static func sentCommands(_ page: BrowserPage) throws -> [String] {
        try page.evaluate("""
            window.inkwireBoard.sent.map(c => [c.t, c.type, c.stroke ?? '', c.tool ?? '', c.phase ?? '', c.x ?? '', c.y ?? '',
              c.color ?? '', c.width ?? '', c.page ?? ''].join(':'))
            """) as? [String] ?? []
    }

    /// The same line for a command a native device received.
    static func line(_ timed: TimedCommand) -> String {
        let t = timed.timeMs
        switch timed.command {
        case .point(let p): return "\(t):point:\(p.stroke.rawValue):\(p.tool.rawValue):\(p.phase.rawValue):\(p.x):\(p.y):::"
        case .penStyle(let s): return "\(t):pen::::::\(s.color):\(s.width):"
        case .undo(let s): return "\(t):undo:\(s.rawValue):::::::"
        case .redo(let s): return "\(t):redo:\(s.rawValue):::::::"
        case .clear: return "\(t):clear::::::::"
        case .switchPage(let p): return "\(t):switchPage::::::::\(p.rawValue)"
        case .addPage(let p): return "\(t):addPage::::::::\(p.rawValue)"
        case .room(.presentPage(let p)): return "\(t):present::::::::\(p.rawValue)"
        default: return "\(t):\(timed.command)"
        }
    }

    /// The room's board digest as a fresh native device sees it after its history sync.
    static func roomDigest(_ daemon: Daemon, room: String) throws -> (digest: UInt64, roomSeq: UInt64, board: Board) {
        let device = try NativeTestClient(.tcp, port: daemon.tcp)
        device.join(room: room, user: "checker-\(UInt32.random(in: 0...UInt32.max))", role: .viewer)
        var board = Board()
        var head: UInt64 = 0
        var live = BinaryCodecState()
        while let message = device.next(limitMicroseconds: 10_000_000) {
            switch message {
            case .joinAccepted(_, _, let roomHead, true):
                head = roomHead
            case .syncChunk(_, _, let items):
                for item in items {
                    var fresh = BinaryCodecState()
                    if let batch = try? BinaryBatchCodec.decode(item.payload, state: &fresh) {
                        board.apply(Batch(author: item.author, commands: batch.commands))
                    }
                }
            case .syncDone(_, let seq, let digest):
                // A sync through the last snapshot is followed by the rest as live batches.
                if seq >= head { return (digest, seq, board) }
                #expect(board.digest == digest)
            case .roomBatch(let rb):
                guard let batch = try? BinaryBatchCodec.decode(rb.payload, state: &live) else { continue }
                board.apply(Batch(author: rb.author, commands: batch.commands))
                if rb.roomSeq >= head { return (board.digest, rb.roomSeq, board) }
            case .joinAccepted(_, _, let head, let follows) where !follows:
                return (board.digest, head, board)
            default:
                continue
            }
        }
        throw DaemonProcess.SpawnError(message: "no sync from the daemon")
    }

    static func digestHex(_ d: UInt64) -> String {
        let h = String(d, radix: 16)
        return String(repeating: "0", count: 16 - h.count) + h
    }

    // MARK: tests

    /// A page draws scripted strokes; a second page, a native watcher and a legacy device receive
    /// exactly those commands, and the second page's board digest equals the room's.
    @Test func strokesFromAPageReachEveryKindOfMember() throws {
        let daemon = try Self.startDaemon("web-relay")
        let browser = try Chromium()
        defer { browser.quit() }
        let watcher = try NativeTestClient(.tcp, port: daemon.tcp)
        watcher.join(room: "r", user: "watcher", role: .viewer)
        guard case .joinAccepted? = watcher.next(where: { if case .joinAccepted = $0 { true } else { false } }) else {
            Issue.record("the native watcher did not join")
            return
        }
        let apps = LegacyAppRunner(seed: 31)
        let legacy = try apps.connect("legacy", port: daemon.process.legacyPort(daemon.fields))
        #expect(LegacyApps.waitUp(apps, [legacy]), "\(legacy)")
        let teacher = try Self.openBoard(browser, daemon, room: "r", fragment: "user=ana&role=teacher")
        let second = try Self.openBoard(browser, daemon, room: "r", fragment: "user=bo&role=viewer")
        // Pen 4 (index 3), thick; then the eraser; then undo and redo of the last stroke.
        try Self.click(teacher, "#pens button:nth-child(4)")
        try Self.click(teacher, "#widths button:nth-child(3)")
        let wave: [(Double, Double)] = (0...12).map { (i: Int) -> (Double, Double) in
            let x: Double = 0.1 + Double(i) * 0.05
            let y: Double = 0.2 + Double(i % 4) * 0.03
            return (x, y)
        }
        try Self.draw(teacher, wave)
        try Self.click(teacher, "#pens button:nth-child(6)")
        let rub: [(Double, Double)] = (0...6).map { (i: Int) -> (Double, Double) in (0.2 + Double(i) * 0.02, 0.22) }
        try Self.draw(teacher, rub)
        try Self.click(teacher, "#pens button:nth-child(1)")
        try Self.click(teacher, "#widths button:nth-child(1)")
        try Self.draw(teacher, [(0.5, 0.6), (0.55, 0.65), (0.6, 0.62), (0.7, 0.7)])
        try Self.click(teacher, "#undo")
        try Self.click(teacher, "#redo")
        try #require(teacher.wait(for: "window.inkwireBoard.session.unacknowledgedCount === 0 && window.inkwireBoard.appliedThrough > 0"),
                     "the teacher's batches were not all acknowledged: \(String(describing: try? teacher.evaluate("JSON.stringify({u: window.inkwireBoard.session.unacknowledgedCount, a: window.inkwireBoard.appliedThrough, e: window.inkwireBoard.errors, s: document.getElementById('status-line').textContent})")))")
        let head = try #require(teacher.evaluate("window.inkwireBoard.appliedThrough") as? Int)
        let sent = try Self.sentCommands(teacher)
        try #require(second.wait(for: "window.inkwireBoard.appliedThrough === \(head)"), "the second page did not reach roomSeq \(head)")
        let room = try Self.roomDigest(daemon, room: "r")
        #expect(room.roomSeq == UInt64(head))
        #expect(try second.evaluate("window.inkwireBoard.digest") as? String == Self.digestHex(room.digest))
        #expect(try teacher.evaluate("window.inkwireBoard.digest") as? String == Self.digestHex(room.digest))
        // The native watcher gets the teacher's batches in room order, commands exactly as the
        // page made them (the same commands that fold to the room's board).
        var watched: [TimedCommand] = []
        var board = Board()
        var teacherAuthor: AuthorID?
        var liveState = BinaryCodecState()
        while let message = watcher.next(limitMicroseconds: 3_000_000, where: { if case .roomBatch = $0 { true } else { false } }) {
            guard case .roomBatch(let rb) = message, let decoded = try? BinaryBatchCodec.decode(rb.payload, state: &liveState) else { continue }
            teacherAuthor = rb.author
            watched += decoded.commands
            board.apply(Batch(author: rb.author, commands: decoded.commands))
            if rb.roomSeq == UInt64(head) { break }
        }
        #expect(watched.map(Self.line) == sent, "the native watcher did not get exactly the page's commands")
        #expect(board.digest == room.digest, "the watcher's fold differs from the room's board")
        let strokes = board.strokes(on: .first)
        #expect(strokes.count == 3)
        #expect(strokes.map(\.tool) == [.pen, .eraser, .pen])
        #expect(strokes.map(\.style) == [PenStyle(color: 3, width: 3)!, PenStyle(color: 5, width: 3)!, PenStyle(color: 0, width: 1)!])
        #expect(strokes.allSatisfy { $0.isVisible && $0.isEnded })
        #expect(watched.contains { if case .undo = $0.command { true } else { false } })
        // The legacy app shows the room's board: the three strokes as the app draws them.
        let expected = try #require(LegacyAppScreen.expected(from: board, page: .first)[teacherAuthor ?? AuthorID(0)])
        #expect(LegacyApps.waitScreens(apps, [legacy], equal: expected), "\(legacy): \(legacy.model.screen.difference(from: expected) ?? "")")
        #expect(legacy.isConnected && legacy.model.desync == nil, "\(legacy)")
    }

    /// A late-joining page shows a recorded lesson's board: digest equal to the room's, and
    /// pixels drawn where strokes are (on a screenshot of the page).
    @Test func lateJoiningPageShowsARecordedLesson() throws {
        let daemon = try Self.startDaemon("web-late")
        let browser = try Chromium()
        defer { browser.quit() }
        let lesson = WebLesson.commands()
        let author = try NativeTestClient(.tcp, port: daemon.tcp)
        author.join(room: "lesson", user: "teacher", role: .teacher)
        guard case .joinAccepted(let member, _, _, _)? = author.next(where: { if case .joinAccepted = $0 { true } else { false } }) else {
            Issue.record("the recording device did not join")
            return
        }
        var seq: UInt64 = 0
        for batch in Batch.cut(lesson, author: member) {
            seq += 1
            author.sendBatch(batch.commands.map(\.command), originSeq: seq, author: member)
        }
        var acked: UInt64 = 0
        while acked < seq, let message = author.next(limitMicroseconds: 20_000_000, where: { if case .batchAck = $0 { true } else { false } }) {
            if case .batchAck(let origin, _) = message { acked = origin }
        }
        try #require(acked == seq, "the lesson was not stored (\(acked) of \(seq))")
        let room = try Self.roomDigest(daemon, room: "lesson")
        let page = try Self.openBoard(browser, daemon, room: "lesson", fragment: "user=late&role=viewer")
        try #require(page.wait(for: "window.inkwireBoard.appliedThrough === \(room.roomSeq) && window.inkwireBoard.renders > 0"))
        try page.bringToFront()
        #expect(try page.evaluate("window.inkwireBoard.digest") as? String == Self.digestHex(room.digest))
        // The screenshot: ink where the board has visible pen strokes, white far from any.
        usleep(200_000)
        let png = try page.screenshot()
        let rect = try Self.canvasRect(page)
        let visible = room.board.visibleStrokes(on: room.board.presentedPage ?? .first).filter { $0.tool == .pen && $0.points.count > 4 }
        try #require(!visible.isEmpty, "the lesson's board has no stroke to look for")
        var inked: [(Double, Double)] = []
        for stroke in visible.suffix(40) {
            let p = stroke.points[stroke.points.count / 2]
            inked.append((rect.x + Double(p.x) / 1e6 * rect.width, rect.y + Double(p.y) / 1e6 * rect.height))
        }
        let pixels = try WebScreenshot.pixels(png, at: inked, in: browser)
        let dark = pixels.filter { $0.0 + $0.1 + $0.2 < 600 }.count
        #expect(dark >= inked.count * 8 / 10, "only \(dark) of \(inked.count) stroke points are inked on the screenshot")
        let empty = WebScreenshot.emptySpots(room.board, rect: rect)
        let blank = try WebScreenshot.pixels(png, at: empty, in: browser)
        #expect(blank.allSatisfy { $0.0 > 240 && $0.1 > 240 && $0.2 > 240 }, "\(blank) should be white")
    }

    /// A page whose socket is cut mid-stroke reconnects, sends again what was not acknowledged,
    /// and the room ends with every stroke once.
    @Test func pageCutMidStrokeReconnectsAndTheRoomHasEveryStrokeOnce() throws {
        let daemon = try Self.startDaemon("web-cut")
        let browser = try Chromium()
        defer { browser.quit() }
        let page = try Self.openBoard(browser, daemon, room: "cut", fragment: "user=ana&role=presenter")
        try Self.draw(page, [(0.1, 0.1), (0.2, 0.15), (0.3, 0.1), (0.4, 0.2)])
        let r = try Self.canvasRect(page)
        try page.bringToFront()
        try page.mouse("mousePressed", x: r.x + 0.1 * r.width, y: r.y + 0.5 * r.height)
        for i in 1...5 { try page.mouse("mouseMoved", x: r.x + (0.1 + Double(i) * 0.05) * r.width, y: r.y + 0.5 * r.height) }
        usleep(30_000)
        _ = try page.evaluate("window.inkwireBoard.dropConnection()")
        for i in 6...12 { try page.mouse("mouseMoved", x: r.x + (0.1 + Double(i) * 0.05) * r.width, y: r.y + (0.5 + Double(i) * 0.01) * r.height) }
        try page.mouse("mouseReleased", x: r.x + 0.8 * r.width, y: r.y + 0.65 * r.height)
        try Self.draw(page, [(0.2, 0.8), (0.3, 0.85), (0.4, 0.8)])
        try #require(page.wait(for: "window.inkwireBoard.session.connects >= 2 && window.inkwireBoard.session.joined && window.inkwireBoard.session.unacknowledgedCount === 0", timeout: 20),
                     "the page did not reconnect and get every batch acknowledged")
        let room = try Self.roomDigest(daemon, room: "cut")
        let strokes = room.board.strokes(on: .first)
        #expect(strokes.count == 3)
        #expect(strokes.map { $0.ref.stroke.rawValue } == [1, 2, 3])
        // Every point once: press, moves and release: 1 + 3 + 1, 1 + 12 + 1, 1 + 2 + 1.
        #expect(strokes.map(\.points.count) == [5, 14, 4])
        #expect(try page.evaluate("window.inkwireBoard.digest") as? String == Self.digestHex(room.digest))
        #expect(daemon.process.waitForLine(containing: "web socket closed by the page") != nil)
    }

    /// A viewer's page shows no drawing tools, its pointer strokes send nothing, and a batch it
    /// sends anyway is refused by the daemon (permissionDenied), shown on the page.
    @Test func viewerPageCannotDraw() throws {
        let daemon = try Self.startDaemon("web-viewer")
        let browser = try Chromium()
        defer { browser.quit() }
        let page = try Self.openBoard(browser, daemon, room: "v", fragment: "user=cy&role=viewer")
        #expect(try page.evaluate("getComputedStyle(document.getElementById('undo')).display") as? String == "none")
        try Self.draw(page, [(0.3, 0.3), (0.4, 0.4), (0.5, 0.3)])
        usleep(200_000)
        #expect(try page.evaluate("window.inkwireBoard.session.follower.nextOriginSeq") as? Int == 1)
        _ = try page.evaluate("window.inkwireBoard.sendRaw([{t: 0, type: 'point', stroke: 1, tool: 1, phase: 1, x: 1, y: 1}])")
        #expect(page.wait(for: "document.getElementById('status-line').textContent.includes('You may not draw')"))
        #expect(try Self.roomDigest(daemon, room: "v").board.strokeCount == 0)
    }

    /// Pages: the teacher adds one, draws on it and presents it; a following page goes there
    /// and shows the stroke; a page not following stays.
    @Test func pagesFollowThePresentedPage() throws {
        let daemon = try Self.startDaemon("web-pages")
        let browser = try Chromium()
        defer { browser.quit() }
        let teacher = try Self.openBoard(browser, daemon, room: "p", fragment: "user=ana&role=teacher")
        let pupil = try Self.openBoard(browser, daemon, room: "p", fragment: "user=bo&role=viewer")
        try Self.click(teacher, "#add-page")
        try Self.draw(teacher, [(0.3, 0.3), (0.4, 0.35), (0.5, 0.3)])
        try Self.click(teacher, "#present")
        #expect(pupil.wait(for: "window.inkwireBoard.board.presentedPage === 1 && document.getElementById('page').value === '1'"),
                "the following page did not go to the presented page")
        #expect(try pupil.evaluate("window.inkwireBoard.board.strokesOn(1).length") as? Int == 1)
        _ = try pupil.evaluate("document.getElementById('follow').click()")
        _ = try pupil.evaluate("(() => { const s = document.getElementById('page'); s.value = '0'; s.dispatchEvent(new Event('change')); })()")
        try Self.click(teacher, "#add-page")
        try Self.click(teacher, "#present")
        #expect(pupil.wait(for: "window.inkwireBoard.board.presentedPage === 2"))
        usleep(100_000)
        #expect(try pupil.evaluate("document.getElementById('page').value") as? String == "0")
        let room = try Self.roomDigest(daemon, room: "p")
        #expect(room.board.pages == [PageID(0), PageID(1), PageID(2)])
        #expect(try pupil.evaluate("window.inkwireBoard.digest") as? String == Self.digestHex(room.digest))
    }

    /// With join tokens required, a page without a valid token is refused with a visible
    /// message; one with a valid token joins (the token rides in the fragment, never in a request).
    @Test func pageWithoutAValidTokenIsRefusedVisibly() throws {
        let directory = DaemonProcess.scratchDirectory("web-token-secret")
        defer { _ = system("rm -rf '\(directory)'") }
        let secret = Array("0123456789abcdef-web-test-secret".utf8)
        writeFile(directory + "/secret", secret)
        let daemon = try Self.startDaemon("web-token", extra: ["--token-secret-file", directory + "/secret"])
        let browser = try Chromium()
        defer { browser.quit() }
        let refused = try browser.open(daemon.url("/room/t#user=eve&role=teacher"))
        #expect(refused.wait(for: "!document.getElementById('refused').hidden && document.getElementById('refused').textContent.includes('badToken')"))
        let forged = try browser.open(daemon.url("/room/t#token=iw1.dAp1CnRlYWNoZXIKOTk5OTk5OTk5OQ.AAAA"))
        #expect(forged.wait(for: "!document.getElementById('refused').hidden && document.getElementById('refused').textContent.includes('Join refused')"))
        let verifier = TokenVerifier(secret: secret)!
        let token = verifier.mint(JoinClaims(room: "t", user: "ana", role: .teacher, expiresAt: UInt64(time(nil)) + 3600))
        let page = try Self.openBoard(browser, daemon, room: "t", fragment: "token=\(token)")
        #expect(try page.evaluate("window.inkwireBoard.session.role") as? String == "teacher")
        #expect(!daemon.process.log.contains(token), "the token reached a log line")
    }

    /// Over HTTPS with the daemon's made certificate trusted the way the README tells a school
    /// (an authority in the browser's certificate store), the page is a secure context: it has
    /// WebCrypto, and the status page shows the certificate's fingerprint.
    @Test func httpsWithTheMadeCertificateIsASecureContext() throws {
        let daemon = try Self.startDaemon("web-tls")
        let home = DaemonProcess.scratchDirectory("web-tls-home")
        defer { _ = system("rm -rf '\(home)'") }
        let certificate = daemon.process.dataDir + "/data/" + WebCertificate.madeCertificateName
        let fingerprint = try #require(WebCertificate.inspect(certificate)?.0)
        var extra: [String] = []
        if access("/usr/bin/certutil", X_OK) == 0 {
            // What the README says: add it as a trusted authority (here: the NSS store Chromium reads on Linux).
            #expect(system("mkdir -p '\(home)/.pki/nssdb' && certutil -d sql:'\(home)/.pki/nssdb' -N --empty-password && certutil -d sql:'\(home)/.pki/nssdb' -A -t 'C,,' -n inkwired -i '\(certificate)'") == 0)
        } else {
            extra = ["--ignore-certificate-errors"]
        }
        let browser = try Chromium(home: home, extraArguments: extra)
        defer { browser.quit() }
        let page = try Self.openBoard(browser, daemon, room: "s", fragment: "user=ana&role=teacher")
        _ = page
        let secure = try browser.open("https://localhost:\(daemon.web)/room/s#user=bo&role=presenter")
        try #require(secure.wait(for: "window.inkwireBoard && window.inkwireBoard.member !== null"), "the https page did not join")
        #expect(try secure.evaluate("window.isSecureContext && !!crypto.subtle") as? Bool == true)
        // What sealed sessions (protocol 2: Noise NK over X25519, AES-256-GCM, SHA-256) need of
        // WebCrypto is there: an X25519 agreement, AES-256-GCM with its 16-byte tag, SHA-256.
        let primitives = try secure.evaluate("""
            (async () => {
              const a = await crypto.subtle.generateKey({ name: 'X25519' }, true, ['deriveBits']);
              const b = await crypto.subtle.generateKey({ name: 'X25519' }, true, ['deriveBits']);
              const ab = new Uint8Array(await crypto.subtle.deriveBits({ name: 'X25519', public: b.publicKey }, a.privateKey, 256));
              const ba = new Uint8Array(await crypto.subtle.deriveBits({ name: 'X25519', public: a.publicKey }, b.privateKey, 256));
              const key = await crypto.subtle.importKey('raw', ab, 'AES-GCM', false, ['encrypt']);
              const sealed = await crypto.subtle.encrypt({ name: 'AES-GCM', iv: new Uint8Array(12) }, key, new Uint8Array(5));
              const hash = await crypto.subtle.digest('SHA-256', new Uint8Array(0));
              return [ab.join() === ba.join(), sealed.byteLength, hash.byteLength];
            })()
            """) as? [Any]
        #expect(primitives?.count == 3 && primitives?[0] as? Bool == true && primitives?[1] as? Int == 21 && primitives?[2] as? Int == 32)
        #expect(try secure.evaluate("document.getElementById('sealing').textContent") as? String == "sealed")
        #expect(try secure.evaluate("window.inkwireBoard.session.sealing") as? String == "sealed")
        let status = try browser.open("https://localhost:\(daemon.web)/")
        #expect(status.wait(for: "document.body.innerText.includes(\(Self.quoted(fingerprint)))"))
        #expect(daemon.process.log.contains(fingerprint))
        // The status page names the daemon's key, and its board links pin it.
        let key = try #require(daemon.fields["public_key"])
        #expect(status.wait(for: "document.body.innerText.includes(\(Self.quoted(key)))"))
        #expect(status.wait(for: "[...document.querySelectorAll('a')].some(a => a.getAttribute('href') === '/room/s#key=\(key)')"))
    }

    /// A page whose link pins another daemon key refuses this daemon visibly: the handshake
    /// does not open (a notice names the key this daemon has), and nothing is joined.
    @Test func aPagePinningAnotherKeyRefusesTheDaemon() throws {
        let daemon = try Self.startDaemon("web-rogue")
        let browser = try Chromium()
        defer { browser.quit() }
        // Another daemon's key (the sealed-session vectors' daemon ephemeral key, any valid key would do).
        let other = PublicKeyText.encode(try #require(PublicKeyText.decode("79a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a")))
        let page = try browser.open(daemon.url("/room/k#user=ana&role=teacher&key=\(other)"))
        let refused = page.wait(for: "!document.getElementById('refused').hidden")
        #expect(refused, "the page shows no refusal: \(String(describing: try? page.evaluate("document.body.innerText")))")
        let text = try page.evaluate("document.getElementById('refused').textContent") as? String ?? ""
        let key = try #require(daemon.fields["public_key"])
        #expect(text.contains("did not prove key \(other)") && text.contains("it presents \(key)"), "\(text)")
        #expect(try page.evaluate("window.inkwireBoard.member === null") as? Bool == true)
        #expect(try page.evaluate("window.inkwireBoard.session.connects") as? Int == 1, "a page refused by its pin must not retry")
    }

    /// A page from a plain-http origin that is not this machine's (as a pupil's browser opening
    /// http://LAN-ADDRESS gets) is no secure context and has no WebCrypto: it says so, names the
    /// https address, and sends nothing (no socket, no member). `classroom.test` is mapped to
    /// loopback inside the browser only.
    @Test func aPageThatCannotSealSaysSoAndSendsNothing() throws {
        let daemon = try Self.startDaemon("web-unsealable")
        let browser = try Chromium(extraArguments: ["--host-resolver-rules=MAP classroom.test 127.0.0.1"])
        defer { browser.quit() }
        let page = try browser.open("http://classroom.test:\(daemon.web)/room/u#user=ana&role=teacher")
        #expect(page.wait(for: "document.getElementById('sealing').textContent === 'cannot seal'"))
        #expect(try page.evaluate("window.isSecureContext") as? Bool == false)
        let banner = try page.evaluate("document.getElementById('seal-warning').hidden ? '' : document.getElementById('seal-warning').textContent") as? String ?? ""
        #expect(banner.contains("cannot seal its session") && banner.contains("https://classroom.test:\(daemon.web)/room/u"), "\(banner)")
        #expect(try page.evaluate("document.getElementById('connection').textContent") as? String == "not connected")
        #expect(try page.evaluate("window.inkwireBoard.session.connects") as? Int == 0)
        let status = try httpGet(port: daemon.web, path: "/status.json").text
        #expect(status.contains("\"rooms\":[]") || !status.contains("\"transport\":\"web\""), "\(status)")
    }
}

/// A lesson to record: the first strokes of ../shared/traces/lesson-a.csv when it is there,
/// else a synthetic one (rows of short strokes).
enum WebLesson {
    static func commands(lines: Int = 6000) -> [TimedCommand] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        for candidate in ["/../shared/traces/lesson-a.csv", "/../../shared/traces/lesson-a.csv"] {
            guard let text = try? String(contentsOfFile: root + candidate, encoding: .utf8) else { continue }
            let head = text.split(separator: "\n").prefix(lines).joined(separator: "\n") + "\n"
            guard let trace = try? Trace.parse(Array(head.utf8)) else { continue }
            var translator = LegacyTranslator(author: AuthorID(1))
            return trace.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }
        }
        var out: [TimedCommand] = []
        var t: UInt64 = 0
        for s in 0..<200 {
            let x0 = Int32(50_000 + (s % 20) * 45_000)
            let y0 = Int32(80_000 + (s / 20) * 90_000)
            for i in 0..<12 {
                t += 17
                let phase: StrokePhase = i == 0 ? .start : (i == 11 ? .end : .move)
                out.append(TimedCommand(timeMs: t, command: .point(StrokePoint(stroke: StrokeID(UInt32(s + 1)), phase: phase,
                                                                               x: x0 + Int32(i) * 2500, y: y0 + Int32(i % 3) * 6000))))
            }
        }
        return out
    }
}

/// Pixels of a screenshot, decoded by the browser itself (Foundation on Linux has no PNG
/// decoder): the PNG goes into an image on a blank page and is read back through a canvas.
enum WebScreenshot {
    static func pixels(_ png: Data, at points: [(Double, Double)], in browser: Chromium) throws -> [(Int, Int, Int)] {
        let page = try browser.open("about:blank")
        defer { page.close() }
        let list = points.map { "[\($0.0),\($0.1)]" }.joined(separator: ",")
        // The darkest pixel within 2 px of each point (strokes are antialiased, a point may sit on an edge).
        let script = """
            (async () => {
              const img = new Image();
              img.src = 'data:image/png;base64,\(png.base64EncodedString())';
              await img.decode();
              const c = document.createElement('canvas');
              c.width = img.width; c.height = img.height;
              const g = c.getContext('2d');
              g.drawImage(img, 0, 0);
              return [\(list)].map(([x, y]) => {
                let best = [255, 255, 255];
                for (let dx = -2; dx <= 2; dx++) for (let dy = -2; dy <= 2; dy++) {
                  const d = g.getImageData(Math.round(x) + dx, Math.round(y) + dy, 1, 1).data;
                  if (d[0] + d[1] + d[2] < best[0] + best[1] + best[2]) best = [d[0], d[1], d[2]];
                }
                return best;
              });
            })()
            """
        let values = try page.evaluate(script, timeout: 60) as? [[Int]] ?? []
        return values.map { ($0[0], $0[1], $0[2]) }
    }

    /// A few spots of the canvas far (over 5 % of the view) from every point of the board.
    static func emptySpots(_ board: Board, rect: (x: Double, y: Double, width: Double, height: Double)) -> [(Double, Double)] {
        let points = board.strokes(on: board.presentedPage ?? .first).flatMap(\.points)
        var spots: [(Double, Double)] = []
        for gx in stride(from: 0.05, to: 0.96, by: 0.1) {
            for gy in stride(from: 0.05, to: 0.96, by: 0.1) {
                let far = points.allSatisfy { abs(Double($0.x) / 1e6 - gx) > 0.05 || abs(Double($0.y) / 1e6 - gy) > 0.05 }
                if far { spots.append((rect.x + gx * rect.width, rect.y + gy * rect.height)) }
                if spots.count >= 6 { return spots }
            }
        }
        return spots
    }
}
