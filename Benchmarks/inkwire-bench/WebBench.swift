// `inkwire-bench web late-join|latency`: the browser client against the real inkwired, driven
// through Debian's headless Chromium (InkBenchSupport.Chromium).
//   late-join: a page opens a room holding a recorded lesson (--trace) or N points (--points):
//              ms from navigation to joined, to the sync's end, and to the board drawn.
//   latency:   a page draws with pointer events at 60 Hz; per live batch, the time until a
//              second page has it (page -> daemon -> page) and a native TCP watcher has it,
//              beside a native sender's batches to a native watcher (native -> daemon -> native).
import Foundation
import Glibc
import InkBenchSupport
import InkCodec
import InkCrypto
import InkProtocol

struct WebBenchOptions {
    var mode = "late-join"
    var tracePath: String?
    var points = 1_000_000
    var runs = 3
    var strokePoints = 600
}

func runWebBench(_ arguments: [String]) -> Never {
    var options = WebBenchOptions()
    var i = 0
    func value() -> String {
        i += 1
        guard i < arguments.count else { webBenchUsage("\(arguments[i - 1]) needs a value") }
        return arguments[i]
    }
    if let first = arguments.first, !first.hasPrefix("--") {
        options.mode = first
        i = 1
    }
    while i < arguments.count {
        switch arguments[i] {
        case "--trace": options.tracePath = value()
        case "--points": options.points = Int(value()) ?? -1
        case "--runs": options.runs = Int(value()) ?? -1
        case "--stroke-points": options.strokePoints = Int(value()) ?? -1
        case "-h", "--help": webBenchUsage(nil)
        default: webBenchUsage("unknown option \(arguments[i])")
        }
        i += 1
    }
    guard options.points >= 0, options.runs >= 1, options.strokePoints >= 10 else { webBenchUsage("bad number") }
    guard Chromium.binary != nil else {
        fanoutLog("inkwire-bench web: chromium is not installed (apt install chromium)\n")
        exit(1)
    }
    switch options.mode {
    case "late-join": webLateJoin(options)
    case "latency": webLatency(options)
    default: webBenchUsage("unknown mode \(options.mode)")
    }
    exit(0)
}

private func webBenchUsage(_ problem: String?) -> Never {
    if let problem { fanoutLog("inkwire-bench web: \(problem)\n") }
    fanoutLog("""
        usage: inkwire-bench web late-join [--trace lesson.csv] [--points 1000000] [--runs 3]
               inkwire-bench web latency [--stroke-points 600]

        """)
    exit(problem == nil ? 0 : 2)
}

// MARK: the daemon

/// inkwired on loopback with its web listener.
private final class WebBenchDaemon {
    let pid: pid_t
    let directory: String
    let web: UInt16
    let tcp: UInt16
    /// The daemon's public key (its ready line's), which the native members pin.
    let publicKey: [UInt8]

    init() throws {
        var template = Array("/tmp/inkwire-bench-web-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { throw Chromium.Failure("mkdtemp") }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let log = directory + "/stderr.log"
        let argv = [FanoutDaemon.binaryPath, "--udp", "off", "--tcp", "127.0.0.1:0", "--web", "127.0.0.1:0", "--data-dir", directory + "/data",
                    "--log-level", "warning", "--max-room-history-bytes", "\(1 << 30)"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let cArgs = argv.map { strdup($0) } + [nil]
        var child = pid_t()
        let rc = posix_spawn(&child, argv[0], &actions, nil, cArgs, environ)
        cArgs.forEach { free($0) }
        posix_spawn_file_actions_destroy(&actions)
        guard rc == 0 else { throw Chromium.Failure("cannot start \(argv[0])") }
        pid = child
        var ports: (UInt16, UInt16)?
        var key: [UInt8]?
        for _ in 0..<400 where ports == nil {
            usleep(25_000)
            guard let text = try? String(contentsOfFile: log, encoding: .utf8), let line = text.split(separator: "\n").first(where: { $0.contains("msg=\"ready\"") }) else { continue }
            func port(_ key: String) -> UInt16? {
                guard let r = line.range(of: " \(key)=") else { return nil }
                return line[r.upperBound...].prefix { $0 != " " }.split(separator: ":").last.flatMap { UInt16($0) }
            }
            if let w = port("web"), let t = port("tcp") { ports = (w, t) }
            key = BenchSecurity.publicKey(readyLine: line)
        }
        guard let ports, let key else {
            kill(child, SIGKILL)
            throw Chromium.Failure("inkwired did not get ready: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        (web, tcp) = ports
        publicKey = key
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        _ = try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A native device on a sealed TCP stream (docs/protocol.md 4.6, OpenSSL), blocking: join,
/// batches, and what the daemon sends back (each message stamped with its arrival, epoch ms).
/// Its inbox and stream are behind a lock (a reader thread fills the inbox).
private final class WebBenchStream: @unchecked Sendable {
    let fd: Int32
    private var decoder = StreamFrameDecoder(maxFrameBytes: 1 << 24)
    private var stream: SealedStreamSession?
    private let serverKey: [UInt8]
    private var outCodec = BinaryCodecState()
    private var inCodec = BinaryCodecState()
    private(set) var member = AuthorID(0)
    var received: [(ServerMessage, Double)] {
        get { lock.lock(); defer { lock.unlock() }; return inbox }
        set { lock.lock(); inbox = newValue; lock.unlock() }
    }
    private var inbox: [(ServerMessage, Double)] = []
    private let lock = NSLock()
    private var reader: Thread?
    private var reading = false

    init(port: UInt16, serverKey: [UInt8], room: String, user: String, role: MemberRole) throws {
        self.serverKey = serverKey
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { throw Chromium.Failure("connect 127.0.0.1:\(port)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        send(.join(JoinRequest(room: room, user: user, role: role, origin: UInt64.random(in: 1...UInt64.max))))
        guard case .joinAccepted(let id, _, _, _)? = next(timeout: 10, where: { if case .joinAccepted = $0 { true } else { false } }) else {
            throw Chromium.Failure("\(user) did not join")
        }
        member = id
    }

    deinit {
        stopReading()
        close(fd)
    }

    /// Reads on a thread of its own from now on, so each message is stamped when it arrives
    /// (the driving thread blocks on the browser).
    func startReading() {
        reading = true
        // Holds the stream until `stopReading` ends the loop.
        let thread = Thread { [self] in
            while self.lock.withLock({ self.reading }) { self.pump(milliseconds: 5) }
        }
        reader = thread
        thread.start()
    }

    func stopReading() {
        guard reader != nil else { return }
        lock.withLock { reading = false }
        usleep(20_000)
        reader = nil
    }

    private var now: Instant { Instant(microseconds: UInt64(Date().timeIntervalSince1970 * 1_000_000)) }

    /// Seals one session message (the first: the join, in the handshake) and writes what the stream has.
    func send(_ message: ClientMessage) {
        let bytes = SessionMessageCodec.encode(message)
        lock.withLock {
            if let stream {
                stream.send(bytes, now: now)
            } else {
                stream = SealedStreamSession(serverKey: serverKey, join: bytes, crypto: OpenSSLCrypto.shared)
            }
            flush()
        }
    }

    /// Writes the stream's queued messages, length-prefixed (call with the lock held).
    private func flush() {
        while let m = stream?.pollMessage() { write(StreamFrameDecoder.frame(m)) }
    }

    private func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    func sendBatch(_ commands: [TimedCommand], originSeq: UInt64) {
        let payload = try! BinaryBatchCodec.encode(Batch(author: member, commands: commands), state: &outCodec)
        send(.batch(originSeq: originSeq, payload: payload))
    }

    /// Reads for up to `timeout` s (what arrives goes to `received`); the first match, taken.
    func next(timeout: Double, where match: (ServerMessage) -> Bool) -> ServerMessage? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = received.firstIndex(where: { match($0.0) }) {
                let m = received[index].0
                received.removeSubrange(...index)
                return m
            }
            guard Date() < deadline else { return nil }
            pump(milliseconds: 20)
        }
    }

    func pump(milliseconds: Int32) {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, milliseconds) > 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { return }
        let at = Date().timeIntervalSince1970 * 1000
        decoder.handleBytes(Array(buffer[..<n]))
        lock.withLock {
            while let frame = try? decoder.pollFrame() {
                guard let stream, (try? stream.handleMessage(frame, now: now)) != nil else { continue }
                while let event = stream.pollEvent() {
                    if case .delivered(let bytes) = event, let m = try? SessionMessageCodec.decodeServer(bytes) { inbox.append((m, at)) }
                }
            }
            flush()
        }
    }

    /// The commands of a room batch, decoded in order with this device's live codec state.
    func decode(_ rb: RoomBatch) -> [TimedCommand] {
        (try? BinaryBatchCodec.decode(rb.payload, state: &inCodec))?.commands ?? []
    }
}

// MARK: late join

private func webLateJoin(_ options: WebBenchOptions) {
    var boards: [(String, [[TimedCommand]])] = []
    let trace = options.tracePath ?? ["../shared/traces/lesson-a.csv", "../../shared/traces/lesson-a.csv"].first { access($0, R_OK) == 0 }
    if let trace, let data = FileManager.default.contents(atPath: trace), let lesson = try? BenchTrace([UInt8](data)) {
        boards.append(("lesson-a", Batch.cut(lesson.commands, author: AuthorID(1)).map(\.commands)))
    }
    if options.points > 0 { boards.append(("\(options.points)-points", syncBenchBoard(points: options.points))) }
    var rows: [[String]] = []
    for (name, batches) in boards {
        do {
            let daemon = try WebBenchDaemon()
            defer { daemon.stop() }
            let author = try WebBenchStream(port: daemon.tcp, serverKey: daemon.publicKey, room: "late", user: "teacher", role: .teacher)
            // Pipelined, 256 batches ahead of their acks.
            var acked: UInt64 = 0
            for (k, batch) in batches.enumerated() {
                author.sendBatch(batch, originSeq: UInt64(k + 1))
                while UInt64(k + 1) - acked > 256 {
                    if case .batchAck(let o, _)? = author.next(timeout: 30, where: { if case .batchAck = $0 { true } else { false } }) { acked = o } else { break }
                }
            }
            while acked < UInt64(batches.count) {
                guard case .batchAck(let o, _)? = author.next(timeout: 60, where: { if case .batchAck = $0 { true } else { false } }) else { break }
                acked = o
            }
            let points = batches.reduce(0) { $0 + $1.filter { if case .point = $0.command { true } else { false } }.count }
            let browser = try Chromium(windowSize: (1280, 1000))
            defer { browser.quit() }
            var drawn: [Double] = []
            for run in 1...options.runs {
                let page = try browser.open("http://127.0.0.1:\(daemon.web)/room/late#user=late\(run)&role=viewer")
                guard page.wait(for: "window.inkwireBoard && window.inkwireBoard.timing.drawnAt !== null", timeout: 120) else {
                    print("{\"bench\":\"web-late-join\",\"board\":\"\(name)\",\"run\":\(run),\"failure\":\"not drawn within 120 s\"}")
                    continue
                }
                let t = (try? page.evaluate("JSON.stringify(window.inkwireBoard.timing)") as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Double] } ?? [:]
                let applied = (try? page.evaluate("window.inkwireBoard.appliedThrough") as? Int) ?? 0
                let nav = (try? page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd") as? Double) ?? 0
                drawn.append(t["drawnAt"] ?? 0)
                print("{\"bench\":\"web-late-join\",\"board\":\"\(name)\",\"batches\":\(batches.count),\"points\":\(points),\"run\":\(run),"
                    + "\"page_loaded_ms\":\(fixed(nav)),\"joined_ms\":\(fixed(t["joinedAt"] ?? 0)),\"synced_ms\":\(fixed(t["syncedAt"] ?? 0)),"
                    + "\"drawn_ms\":\(fixed(t["drawnAt"] ?? 0)),\"room_seq\":\(applied)}")
                fflush(nil)
                page.close()
            }
            let sorted = drawn.sorted()
            rows.append([name, "\(points)", "\(batches.count)", sorted.isEmpty ? "-" : fixed(sorted[sorted.count / 2]),
                         sorted.map { fixed($0) }.joined(separator: ", ")])
        } catch {
            print("{\"bench\":\"web-late-join\",\"board\":\"\(name)\",\"failure\":\"\(error)\"}")
        }
    }
    printWebTable(["board", "points", "batches", "drawn ms (median)", "runs"], rows)
}

// MARK: latency

private func webLatency(_ options: WebBenchOptions) {
    do {
        let daemon = try WebBenchDaemon()
        defer { daemon.stop() }
        let watcher = try WebBenchStream(port: daemon.tcp, serverKey: daemon.publicKey, room: "lat", user: "native-watcher", role: .viewer)
        watcher.startReading()
        let browser = try Chromium(windowSize: (1100, 900))
        defer { browser.quit() }
        let receiver = try browser.open("http://127.0.0.1:\(daemon.web)/room/lat#user=viewer&role=viewer")
        let drawer = try browser.open("http://127.0.0.1:\(daemon.web)/room/lat#user=drawer&role=presenter")
        guard drawer.wait(for: "window.inkwireBoard && window.inkwireBoard.member !== null") && receiver.wait(for: "window.inkwireBoard && window.inkwireBoard.member !== null") else {
            throw Chromium.Failure("the pages did not join")
        }
        try drawer.bringToFront()
        let json = try drawer.evaluate("JSON.stringify(document.getElementById('board').getBoundingClientRect())") as? String ?? "{}"
        let r = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Double] ?? [:]
        let (x0, y0, w, h) = (r["x"] ?? 0, r["y"] ?? 0, r["width"] ?? 800, r["height"] ?? 600)
        // Strokes of 60 points, one pointer event every 1/60 s.
        var sentEvents = 0
        let started = Date()
        while sentEvents < options.strokePoints {
            let stroke = sentEvents / 60
            let i = sentEvents % 60
            let x = x0 + w * (0.1 + 0.8 * Double(i) / 60)
            let y = y0 + h * (0.1 + 0.05 * Double(stroke % 16) + 0.02 * sin(Double(i) / 5))
            try drawer.mouse(i == 0 ? "mousePressed" : (i == 59 ? "mouseReleased" : "mouseMoved"), x: x, y: y)
            sentEvents += 1
            let due = started.addingTimeInterval(Double(sentEvents) / 60)
            let wait = due.timeIntervalSinceNow
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
        }
        usleep(2_000_000)
        watcher.stopReading()
        let sentAt = try drawer.evaluate("window.inkwireBoard.sentAt") as? [Double] ?? []
        let arrivals = (try receiver.evaluate("window.inkwireBoard.arrivals") as? [[Double]] ?? []).map { $0[1] }
        let nativeArrivals = watcher.received.compactMap { (m, at) -> Double? in if case .roomBatch = m { at } else { nil } }
        let pageToPage = zip(sentAt, arrivals).map { $1 - $0 }
        let pageToNative = zip(sentAt, nativeArrivals).map { $1 - $0 }
        // Native -> daemon -> native on the same rate and batch shape: one point a batch.
        let sender = try WebBenchStream(port: daemon.tcp, serverKey: daemon.publicKey, room: "lat-native", user: "native-drawer", role: .presenter)
        let nativeWatcher = try WebBenchStream(port: daemon.tcp, serverKey: daemon.publicKey, room: "lat-native", user: "native-watcher-2", role: .viewer)
        nativeWatcher.startReading()
        sender.startReading()
        var nativeSent: [Double] = []
        let nativeStart = Date()
        for k in 0..<options.strokePoints {
            let stroke = UInt32(k / 60 + 1)
            let i = k % 60
            let phase: StrokePhase = i == 0 ? .start : (i == 59 ? .end : .move)
            let command = TimedCommand(timeMs: UInt64(k) * 1000 / 60, command: .point(StrokePoint(stroke: StrokeID(stroke), phase: phase,
                                                                                                   x: Int32(100_000 + i * 13_000), y: Int32(100_000 + Int(stroke) * 40_000))))
            nativeSent.append(Date().timeIntervalSince1970 * 1000)
            sender.sendBatch([command], originSeq: UInt64(k + 1))
            let wait = nativeStart.addingTimeInterval(Double(k + 1) / 60).timeIntervalSinceNow
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
        }
        usleep(2_000_000)
        nativeWatcher.stopReading()
        sender.stopReading()
        let nativeToNative = zip(nativeSent, nativeWatcher.received.compactMap { (m, at) -> Double? in if case .roomBatch = m { at } else { nil } }).map { $1 - $0 }
        var rows: [[String]] = []
        for (path, samples, batches) in [("page -> daemon -> page", pageToPage, sentAt.count), ("page -> daemon -> native watcher (tcp)", pageToNative, sentAt.count),
                                         ("native -> daemon -> native watcher (tcp)", nativeToNative, nativeSent.count)] {
            let s = samples.sorted()
            let p50 = s.isEmpty ? 0 : s[s.count / 2]
            let p99 = s.isEmpty ? 0 : s[min(s.count - 1, s.count * 99 / 100)]
            print("{\"bench\":\"web-latency\",\"path\":\"\(path)\",\"batches\":\(batches),\"samples\":\(s.count),\"p50_ms\":\(fixed(p50)),\"p99_ms\":\(fixed(p99)),\"max_ms\":\(fixed(s.last ?? 0))}")
            rows.append([path, "\(s.count) of \(batches)", fixed(p50), fixed(p99), fixed(s.last ?? 0)])
        }
        printWebTable(["path", "batches measured", "p50 ms", "p99 ms", "max ms"], rows)
    } catch {
        print("{\"bench\":\"web-latency\",\"failure\":\"\(error)\"}")
        exit(1)
    }
}

private func fixed(_ v: Double) -> String { String(format: "%.2f", v) }

private func printWebTable(_ head: [String], _ rows: [[String]]) {
    print("\n| " + head.joined(separator: " | ") + " |")
    print("|" + head.map { _ in " --- |" }.joined())
    for row in rows { print("| " + row.joined(separator: " | ") + " |") }
}
