import Glibc
import InkClient
import InkCodec
import InkProtocol
import InkUV

/// One `ClientSession` over a UDP socket on an InkUV loop (the bench's own small driver).
private final class SyncBenchUDPClient {
    let loop: EventLoop
    let session: ClientSession
    private let socket: UDPSocket
    private let timer: LoopTimer
    var bytes = 0
    var datagrams = 0
    var events: [ClientEvent] = []

    init(loop: EventLoop, server: SocketAddress, configuration: ClientConfiguration) throws {
        self.loop = loop
        socket = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try socket.connect(to: server)
        try? socket.setReceiveBufferSize(8 << 20)
        timer = try LoopTimer(loop: loop)
        session = ClientSession(configuration, transport: .datagram(connectionID: UInt64.random(in: 1...UInt64.max)),
                                now: Instant(microseconds: loop.now))
        try socket.startReceiving { [unowned self] buffer, _ in
            bytes += buffer.count
            datagrams += 1
            session.handleDatagram(Array(buffer), now: Instant(microseconds: loop.now))
            pump()
        }
        pump()
    }

    func pump() {
        let now = Instant(microseconds: loop.now)
        while let d = session.pollTransmit(now: now) { _ = try? socket.send(d) }
        while let e = session.pollEvent() { events.append(e) }
        if let t = session.pollTimeout() {
            timer.start(atMicroseconds: max(t.microseconds, loop.now)) { [unowned self] in
                session.handleTimeout(now: Instant(microseconds: loop.now))
                pump()
            }
        } else {
            timer.stop()
        }
    }

    func close() {
        timer.close()
        socket.close()
    }
}

/// A release `inkwired` from the same build directory, on 127.0.0.1 with a scratch data dir.
private struct SyncBenchDaemon {
    let pid: pid_t
    let directory: String
    let udp: SocketAddress

    init() {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let exe = String(decoding: buffer[..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let binary = exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/inkwired"
        var template = Array("/tmp/inkwire-bench-sync-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { fatalError("mkdtemp failed") }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let log = directory + "/stderr.log"
        let argv = [binary, "--udp", "127.0.0.1:0", "--data-dir", directory + "/data"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let cArgs = argv.map { strdup($0) } + [nil]
        var child = pid_t()
        let rc = posix_spawn(&child, binary, &actions, nil, cArgs, environ)
        cArgs.forEach { free($0) }
        posix_spawn_file_actions_destroy(&actions)
        guard rc == 0 else {
            print("sync bench: cannot start \(binary): \(String(cString: strerror(rc)))")
            exit(1)
        }
        pid = child
        var found: SocketAddress?
        for _ in 0..<2000 where found == nil {
            usleep(5_000)
            guard let file = fopen(log, "r") else { continue }
            var line = [CChar](repeating: 0, count: 8192)
            while fgets(&line, Int32(line.count), file) != nil {
                let text = String(cString: line)
                guard text.contains("msg=\"ready\""), let range = text.range(of: " udp=") else { continue }
                let value = text[range.upperBound...].prefix { $0 != " " && $0 != "\n" }.filter { $0 != "\"" }
                if let port = value.split(separator: ":").last.flatMap({ UInt16($0) }) { found = .loopbackIPv4(port: port) }
            }
            fclose(file)
        }
        guard let found else {
            print("sync bench: inkwired did not get ready (log \(log))")
            kill(child, SIGKILL)
            exit(1)
        }
        udp = found
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        var rm = pid_t()
        let rmArgv: [String] = ["/bin/rm", "-rf", directory]
        let args = rmArgv.map { strdup($0) } + [nil]
        if posix_spawn(&rm, "/bin/rm", nil, nil, args, environ) == 0 { waitpid(rm, &status, 0) }
        args.forEach { free($0) }
    }
}

/// A free UDP port on 127.0.0.1 (bound, read, closed: the proxy binds it right after).
private func syncBenchFreePort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return UInt16(bigEndian: address.sin_port)
}

/// `inkwire-bench link` (this executable) between the late viewer and the daemon: loss and
/// half the RTT each way, seeded.
private func syncBenchStartLink(forward: UInt16, lossPercent: Int, rttMs: Int, seed: UInt64) -> (pid_t, SocketAddress) {
    let port = syncBenchFreePort()
    let argv = ["/proc/self/exe", "link", "--listen", "127.0.0.1:\(port)", "--forward", "127.0.0.1:\(forward)",
                "--loss-percent", "\(lossPercent)", "--delay-ms", "\(rttMs / 2)", "--seed", "\(seed)"]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let cArgs = argv.map { strdup($0) } + [nil]
    var child = pid_t()
    let rc = posix_spawn(&child, "/proc/self/exe", &actions, nil, cArgs, environ)
    cArgs.forEach { free($0) }
    posix_spawn_file_actions_destroy(&actions)
    guard rc == 0 else {
        print("sync bench: cannot start the link proxy: \(String(cString: strerror(rc)))")
        exit(1)
    }
    usleep(300_000)
    return (child, .loopbackIPv4(port: port))
}

/// Fills a room of the real daemon from a native teacher (not timed), then times a fresh
/// viewer from its join to the sync done; with `link`, the viewer goes through the
/// impairment proxy (loss percent, RTT ms, seed).
func syncBenchDaemon(_ batches: [[TimedCommand]], link: (loss: Int, rtt: Int, seed: UInt64)? = nil) -> SyncBenchResult {
    let daemon = SyncBenchDaemon()
    defer { daemon.stop() }
    var proxy: pid_t?
    defer {
        if let proxy {
            kill(proxy, SIGTERM)
            var status: Int32 = 0
            waitpid(proxy, &status, 0)
        }
    }
    do {
        let loop = try EventLoop()
        let teacher = try SyncBenchUDPClient(loop: loop, server: daemon.udp,
                                             configuration: ClientConfiguration(room: "bench", user: "teacher", role: .teacher, origin: 1))
        var next = 0
        var acked: UInt64 = 0
        let fillLimit = syncBenchClock() + 300
        while acked < UInt64(batches.count) {
            guard syncBenchClock() < fillLimit else {
                print("sync bench: filling the room timed out (\(acked) of \(batches.count) acknowledged)")
                exit(1)
            }
            while next < batches.count, teacher.session.unacknowledgedCount < 256,
                  (try? teacher.session.send(batches[next], now: Instant(microseconds: loop.now))) != nil { next += 1 }
            teacher.pump()
            _ = loop.runOnce()
            for e in teacher.events { if case .acknowledged(let o, _) = e { acked = max(acked, o) } }
            teacher.events.removeAll()
        }
        var viewerTarget = daemon.udp
        if let link {
            let (pid, address) = syncBenchStartLink(forward: daemon.udp.port, lossPercent: link.loss, rttMs: link.rtt, seed: link.seed)
            proxy = pid
            viewerTarget = address
        }
        let start = syncBenchClock()
        let viewer = try SyncBenchUDPClient(loop: loop, server: viewerTarget,
                                            configuration: ClientConfiguration(room: "bench", user: "late", role: .viewer, origin: 2))
        var matches: Bool?
        while matches == nil {
            guard syncBenchClock() < start + 120 else {
                print("sync bench: the sync did not finish within 120 s")
                exit(1)
            }
            _ = loop.runOnce()
            for e in viewer.events { if case .syncDone(_, _, let m) = e { matches = m } }
            viewer.events.removeAll()
        }
        let seconds = syncBenchClock() - start
        return SyncBenchResult(seconds: seconds, wallSeconds: seconds, bytes: viewer.bytes, datagrams: viewer.datagrams,
                               retransmissions: viewer.session.linkStats?.retransmissions ?? 0, digestOK: matches == true)
    } catch {
        print("sync bench: \(error)")
        exit(1)
    }
}
