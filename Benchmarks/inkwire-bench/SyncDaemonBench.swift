import Glibc
import InkClient
import InkCodec
import InkCrypto
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
    var maxOutOfOrder = 0
    /// Gaps of 15 ms or more between two datagrams reaching the viewer: stalls of the sender.
    var lastArrival: UInt64?
    var stalls = 0
    var stalledMicros: UInt64 = 0
    var longestStall: UInt64 = 0

    init(loop: EventLoop, server: SocketAddress, configuration: ClientConfiguration) throws {
        self.loop = loop
        socket = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try socket.connect(to: server)
        try? socket.setReceiveBufferSize(8 << 20)
        timer = try LoopTimer(loop: loop)
        session = ClientSession(configuration, transport: .datagram(connectionID: UInt64.random(in: 1...UInt64.max)),
                                crypto: OpenSSLCrypto.shared, now: Instant(microseconds: loop.now))
        try socket.startReceiving { [unowned self] buffer, _ in
            bytes += buffer.count
            datagrams += 1
            let arrival = loop.now
            if let last = lastArrival, arrival - last >= 15_000 {
                stalls += 1
                stalledMicros += arrival - last
                longestStall = max(longestStall, arrival - last)
            }
            lastArrival = arrival
            session.handleDatagram(Array(buffer), now: Instant(microseconds: loop.now))
            maxOutOfOrder = max(maxOutOfOrder, session.linkStats?.outOfOrderSegments ?? 0)
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
    /// The daemon's `/metrics` port (for its retransmission counter).
    let metricsPort: UInt16
    /// Its public key (members pin it).
    let publicKey: [UInt8]?

    init() {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let exe = String(decoding: buffer[..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let binary = exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/inkwired"
        var template = Array("/tmp/inkwire-bench-sync-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { fatalError("mkdtemp failed") }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let log = directory + "/stderr.log"
        let argv = [binary, "--udp", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--data-dir", directory + "/data"]
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
        var metrics: UInt16 = 0
        var key: [UInt8]?
        for _ in 0..<2000 where found == nil {
            usleep(5_000)
            guard let file = fopen(log, "r") else { continue }
            var line = [CChar](repeating: 0, count: 8192)
            while fgets(&line, Int32(line.count), file) != nil {
                let text = String(cString: line)
                guard text.contains("msg=\"ready\""), let range = text.range(of: " udp=") else { continue }
                let value = text[range.upperBound...].prefix { $0 != " " && $0 != "\n" }.filter { $0 != "\"" }
                if let port = value.split(separator: ":").last.flatMap({ UInt16($0) }) { found = .loopbackIPv4(port: port) }
                key = text.split(separator: "\n").first.flatMap { BenchSecurity.publicKey(readyLine: $0) }
                if let m = text.range(of: " metrics=") {
                    metrics = text[m.upperBound...].prefix { $0 != " " && $0 != "\n" }.split(separator: ":").last.flatMap { UInt16($0) } ?? 0
                }
            }
            fclose(file)
        }
        guard let found else {
            print("sync bench: inkwired did not get ready (log \(log))")
            kill(child, SIGKILL)
            exit(1)
        }
        udp = found
        metricsPort = metrics
        publicKey = key
    }

    /// One sample of the daemon's `/metrics` (0 when absent).
    func metric(_ series: String) -> Double {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = metricsPort.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return 0 }
        let request = Array("GET /metrics HTTP/1.0\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            response.append(contentsOf: buffer[..<n])
        }
        for line in String(decoding: response, as: UTF8.self).split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return 0
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
private func syncBenchStartLink(forward: UInt16, lossPercent: Int, rttMs: Int, seed: UInt64, report: String) -> (pid_t, SocketAddress) {
    let port = syncBenchFreePort()
    let argv = ["/proc/self/exe", "link", "--listen", "127.0.0.1:\(port)", "--forward", "127.0.0.1:\(forward)",
                "--loss-percent", "\(lossPercent)", "--delay-ms", "\(rttMs / 2)", "--seed", "\(seed)"]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, report, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
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
    func stopProxy() {
        if let pid = proxy {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        proxy = nil
    }
    defer { stopProxy() }
    let linkReport = daemon.directory + "/link.json"
    do {
        let loop = try EventLoop()
        let teacher = try SyncBenchUDPClient(loop: loop, server: daemon.udp,
                                             configuration: ClientConfiguration(room: "bench", user: "teacher", role: .teacher, origin: 1, serverKey: daemon.publicKey))
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
        let retransmissionsBefore = daemon.metric("inkwire_retransmissions_total")
        let daemonCPUBefore = syncBenchCPUMillis(daemon.pid)
        let daemonDropsBefore = syncBenchSocketDrops(ofProcess: daemon.pid)
        let viewerDropsBefore = syncBenchSocketDrops(ofProcess: getpid())
        let benchCPUBefore = syncBenchCPUMillis(getpid())
        let udpBefore = syncBenchUDPCounters()
        var viewerTarget = daemon.udp
        if let link {
            let (pid, address) = syncBenchStartLink(forward: daemon.udp.port, lossPercent: link.loss, rttMs: link.rtt, seed: link.seed, report: linkReport)
            proxy = pid
            viewerTarget = address
        }
        let start = syncBenchClock()
        let viewer = try SyncBenchUDPClient(loop: loop, server: viewerTarget,
                                            configuration: ClientConfiguration(room: "bench", user: "late", role: .viewer, origin: 2, serverKey: daemon.publicKey))
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
        let udpAfter = syncBenchUDPCounters()
        let daemonCPU = syncBenchCPUMillis(daemon.pid) - daemonCPUBefore
        let benchCPU = syncBenchCPUMillis(getpid()) - benchCPUBefore
        let proxyCPU = proxy.map { syncBenchCPUMillis($0) } ?? 0
        // Kernel drops of each UDP socket on the path (the daemon's, the proxy's, this process's).
        let socketDrops = [("daemon", syncBenchSocketDrops(ofProcess: daemon.pid) - daemonDropsBefore),
                           ("link", syncBenchSocketDrops(ofProcess: proxy ?? -1)),
                           ("viewer", syncBenchSocketDrops(ofProcess: getpid()) - viewerDropsBefore)]
        usleep(1_200_000)  // the daemon samples its sessions' counters once a second
        let stats = viewer.session.linkStats ?? ARQStats()
        stopProxy()
        var linkJSON = "null"
        if link != nil, let file = fopen(linkReport, "r") {
            var line = [CChar](repeating: 0, count: 8192)
            if fgets(&line, Int32(line.count), file) != nil { linkJSON = String(cString: line).filter { $0 != "\n" } }
            fclose(file)
        }
        let detail: [(String, String)] = [
            ("daemon_retransmissions", "\(Int(daemon.metric("inkwire_retransmissions_total") - retransmissionsBefore))"),
            ("viewer_duplicates", "\(stats.duplicateSegmentsReceived)"), ("viewer_out_of_order_max", "\(viewer.maxOutOfOrder)"),
            ("viewer_outside_window", "\(stats.segmentsOutsideWindow)"), ("viewer_acks_sent", "\(stats.pureAcksSent)"),
            ("viewer_srtt_ms", "\(Double(stats.smoothedRTT.microseconds) / 1000)"), ("viewer_min_rtt_ms", "\(Double(stats.minRTT.microseconds) / 1000)"),
            ("viewer_stalls_15ms", "\(viewer.stalls)"), ("viewer_stalled_ms", "\(viewer.stalledMicros / 1000)"),
            ("viewer_longest_stall_ms", "\(viewer.longestStall / 1000)"),
            ("socket_drops", "{" + socketDrops.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"),
            ("cpu_ms_daemon", "\(daemonCPU)"), ("cpu_ms_viewer", "\(benchCPU)"), ("cpu_ms_link", "\(proxyCPU)"),
            ("udp_rcvbuf_errors", "\(udpAfter.rcvbufErrors - udpBefore.rcvbufErrors)"), ("link", linkJSON),
        ]
        return SyncBenchResult(seconds: seconds, wallSeconds: seconds, bytes: viewer.bytes, datagrams: viewer.datagrams,
                               retransmissions: stats.retransmissions, digestOK: matches == true, detail: detail)
    } catch {
        print("sync bench: \(error)")
        exit(1)
    }
}

/// The kernel's UDP counters (/proc/net/snmp), machine-wide: receive-buffer overflows.
func syncBenchUDPCounters() -> (rcvbufErrors: Int, inErrors: Int) {
    guard let file = fopen("/proc/net/snmp", "r") else { return (0, 0) }
    defer { fclose(file) }
    var lines: [String] = []
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), file) != nil { lines.append(String(cString: line)) }
    let udp = lines.filter { $0.hasPrefix("Udp: ") }
    guard udp.count >= 2 else { return (0, 0) }
    let names = udp[0].split(separator: " ").map { String($0.filter { !$0.isWhitespace }) }
    let values = udp[1].split(separator: " ").map { Int(String($0.filter { !$0.isWhitespace })) ?? 0 }
    func value(_ name: String) -> Int { names.firstIndex(of: name).map { $0 < values.count ? values[$0] : 0 } ?? 0 }
    return (value("RcvbufErrors"), value("InErrors"))
}

/// User plus system CPU time of process `pid`, in milliseconds (/proc/PID/stat, clock ticks).
func syncBenchCPUMillis(_ pid: pid_t) -> Int {
    guard let file = fopen("/proc/\(pid)/stat", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 4096)
    guard fgets(&line, Int32(line.count), file) != nil else { return 0 }
    let text = String(cString: line)
    guard let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return 0 }
    return (user + system) * 1000 / Int(sysconf(Int32(_SC_CLK_TCK)))
}

/// Datagrams the kernel dropped on the UDP sockets of process `pid` (receive buffer full):
/// its `socket:[inode]` descriptors matched against /proc/net/udp.
func syncBenchSocketDrops(ofProcess pid: pid_t) -> Int {
    guard pid > 0, let directory = opendir("/proc/\(pid)/fd") else { return 0 }
    var inodes: Set<String> = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        var target = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/\(pid)/fd/\(name)", &target, target.count - 1)
        guard n > 0 else { continue }
        let link = String(decoding: target[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if link.hasPrefix("socket:[") { inodes.insert(String(link.dropFirst(8).dropLast())) }
    }
    closedir(directory)
    guard let file = fopen("/proc/net/udp", "r") else { return 0 }
    defer { fclose(file) }
    var drops = 0
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), file) != nil {
        let fields = String(cString: line).split(separator: " ")
        guard fields.count >= 13, inodes.contains(String(fields[9])) else { continue }
        drops += Int(fields[12].filter { !$0.isWhitespace }) ?? 0
    }
    return drops
}
