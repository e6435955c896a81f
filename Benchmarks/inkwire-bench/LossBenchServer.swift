import Glibc
import InkUV

/// The relay process a loss run measures: the real `inkwired` (native UDP and TCP) or the ENet
/// baseline (`inkwire-bench enet-relay`), started from the binaries of this build, on loopback
/// ports they pick, with a fresh scratch directory. Its CPU and peak RSS come from /proc.
final class LossBenchServer {
    /// How long a relay may take to print its ready line.
    static let readyTimeoutMicroseconds: UInt64 = 20_000_000
    /// How long a stopped relay may take to exit before it is killed.
    static let stopTimeoutMicroseconds: UInt64 = 5_000_000

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    enum Kind { case inkwired, enetRelay }

    let kind: Kind
    let pid: pid_t
    let directory: String
    /// Native UDP (inkwired) or the ENet relay's UDP port.
    private(set) var udp: SocketAddress?
    /// Native TCP (inkwired only).
    private(set) var tcp: SocketAddress?
    /// The legacy (HYWhiteboard) listener of `legacyRoom` (inkwired only, when asked for).
    private(set) var legacy: SocketAddress?
    /// The daemon's public key from its ready line (inkwired only): members pin it.
    private(set) var publicKey: [UInt8]?
    private var reaped = false

    /// Starts the relay. `binDirectory` holds `inkwired` and `inkwire-bench`; `launcher` may wrap
    /// the command (e.g. run it inside a network namespace); `host` is the address it binds.
    /// `legacyRoom` adds an inkwired legacy listener for that room on a port it picks.
    init(_ kind: Kind, binDirectory: String, host: String = "127.0.0.1", launcher: [String] = [],
         tcpRetransmitCeilingMs: UInt32 = InkwireLossMember.defaultTCPRetransmitCeilingMs, legacyRoom: String? = nil) throws(Failure) {
        self.kind = kind
        var template = Array("/tmp/inkwire-bench-loss-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw Failure(description: "mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let command: [String]
        switch kind {
        case .inkwired:
            command = [binDirectory + "/inkwired", "--udp", "\(host):0", "--tcp", "\(host):0", "--data-dir", directory + "/data",
                       "--new-sessions-per-second", "100000", "--max-members", "\(LossBenchOptions.maximumMembers)",
                       "--tcp-rto-max-ms", "\(tcpRetransmitCeilingMs)"] + (legacyRoom.map { ["--legacy", "\(host):0=\($0)"] } ?? [])
        case .enetRelay:
            command = [binDirectory + "/inkwire-bench", "enet-relay", "--listen", "\(host):0"]
        }
        let argv = launcher + command
        let log = directory + "/output.log"
        do {
            pid = try lossBenchSpawn(argv, output: log)
        } catch {
            lossBenchRemoveTree(directory)
            throw error
        }
        let deadline = lossBenchNow() + LossBenchServer.readyTimeoutMicroseconds
        while udp == nil || (legacyRoom != nil && legacy == nil) {
            if lossBenchNow() > deadline || lossBenchStopRequested != 0 || !isRunning {
                let tail = lossBenchReadFile(log).suffix(600)
                stop()
                throw Failure(description: "\(argv.joined(separator: " ")) did not get ready: \(String(decoding: tail, as: UTF8.self))")
            }
            usleep(5_000)
            parseReady(String(decoding: lossBenchReadFile(log), as: UTF8.self), host: host)
        }
    }

    private func parseReady(_ text: String, host: String) {
        func port(after key: String, in line: Substring) -> UInt16? {
            guard let range = line.range(of: key) else { return nil }
            let value = line[range.upperBound...].prefix { $0 != " " && $0 != "\n" }.filter { $0 != "\"" }
            return value.split(separator: ":").last.flatMap { UInt16($0) }
        }
        for line in text.split(separator: "\n") {
            switch kind {
            case .inkwired:
                guard line.contains("msg=\"ready\"") else { continue }
                if let u = port(after: " udp=", in: line), let t = port(after: " tcp=", in: line),
                   let ua = try? SocketAddress.parse("\(host):\(u)"), let ta = try? SocketAddress.parse("\(host):\(t)") {
                    publicKey = BenchSecurity.publicKey(readyLine: line)
                    udp = ua
                    tcp = ta
                }
                // legacy="HOST:PORT=ROOM" (one listener here).
                if let range = line.range(of: " legacy=\""), let end = line[range.upperBound...].firstIndex(of: "=") {
                    let address = line[range.upperBound..<end]
                    if let p = address.split(separator: ":").last.flatMap({ UInt16($0) }) { legacy = try? SocketAddress.parse("\(host):\(p)") }
                }
            case .enetRelay:
                guard line.hasPrefix("ready port="), let p = UInt16(line.dropFirst("ready port=".count)) else { continue }
                udp = try? SocketAddress.parse("\(host):\(p)")
            }
        }
    }

    private var isRunning: Bool {
        var status: Int32 = 0
        return !reaped && waitpid(pid, &status, WNOHANG) == 0
    }

    /// CPU seconds (user + system) the process has used so far.
    var cpuSeconds: Double { lossBenchProcessCPUSeconds(pid) }

    /// Peak resident set size in MB (VmHWM).
    var peakRSSMegabytes: Double { lossBenchPeakRSSMegabytes(pid) }

    /// SIGTERM, wait (SIGKILL after `stopTimeoutMicroseconds`), remove the scratch directory.
    func stop() {
        if !reaped {
            lossBenchTerminate(pid, timeoutMicroseconds: LossBenchServer.stopTimeoutMicroseconds)
            reaped = true
        }
        lossBenchRemoveTree(directory)
    }

    deinit { stop() }
}

/// CPU seconds (user + system, every thread) process `pid` has used so far, from /proc/PID/stat.
func lossBenchProcessCPUSeconds(_ pid: pid_t) -> Double {
    let text = String(decoding: lossBenchReadFile("/proc/\(pid)/stat"), as: UTF8.self)
    // Fields after the command name (which may hold spaces) start at field 3.
    guard let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Peak resident set size of process `pid` in MB (VmHWM).
func lossBenchPeakRSSMegabytes(_ pid: pid_t) -> Double {
    let text = String(decoding: lossBenchReadFile("/proc/\(pid)/status"), as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Double($0) } ?? 0
        return kilobytes / 1024
    }
    return 0
}

/// Set by SIGINT/SIGTERM: the run in progress ends, children are stopped, results printed.
nonisolated(unsafe) var lossBenchStopRequested: sig_atomic_t = 0

/// Monotonic microseconds (the clock `EventLoop.now` and ENet stamps read).
func lossBenchNow() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000 + UInt64(spec.tv_nsec) / 1000
}

/// The directory of this executable (inkwired and inkwire-bench are built next to each other;
/// a test bundle sits there too).
func lossBenchBinDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let exe = String(decoding: buffer[..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
}

/// Spawns `argv` in its own process group (a terminal's Ctrl-C reaches only the harness, which
/// stops its children itself), default signal handling, stdin from /dev/null, stdout and
/// stderr into `output`.
func lossBenchSpawn(_ argv: [String], output: String) throws(LossBenchServer.Failure) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setpgroup(&attributes, 0)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
    let cArgs = argv.map { strdup($0) } + [nil]
    defer { cArgs.forEach { free($0) } }
    var child = pid_t()
    let rc = posix_spawn(&child, argv[0], &actions, &attributes, cArgs, environ)
    guard rc == 0 else { throw LossBenchServer.Failure(description: "cannot start \(argv[0]): \(String(cString: strerror(rc)))") }
    return child
}

/// SIGTERM, then SIGKILL if `pid` has not exited within the timeout; always reaps it.
func lossBenchTerminate(_ pid: pid_t, timeoutMicroseconds: UInt64) {
    kill(pid, SIGTERM)
    var status: Int32 = 0
    let deadline = lossBenchNow() + timeoutMicroseconds
    while waitpid(pid, &status, WNOHANG) == 0 {
        if lossBenchNow() > deadline {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            return
        }
        usleep(5_000)
    }
}

/// The whole file, or nothing when it cannot be read.
func lossBenchReadFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let got = read(fd, &chunk, chunk.count)
        if got <= 0 { break }
        out += chunk[..<got]
    }
    return out
}

/// `rm -rf` of a scratch directory this harness made under /tmp.
func lossBenchRemoveTree(_ path: String) {
    guard path.hasPrefix("/tmp/inkwire-bench-loss-") else { return }
    var child = pid_t()
    let argv = ["/bin/rm", "-rf", path]
    let cArgs = argv.map { strdup($0) } + [nil]
    defer { cArgs.forEach { free($0) } }
    var status: Int32 = 0
    if posix_spawn(&child, "/bin/rm", nil, nil, cArgs, environ) == 0 { waitpid(child, &status, 0) }
}
