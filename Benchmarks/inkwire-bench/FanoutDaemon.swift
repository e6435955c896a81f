import Glibc
import InkUV

/// The real `inkwired` (the release binary next to this executable, or next to the test
/// bundle) on 127.0.0.1 port 0 with a scratch data directory, and what /proc says it costs.
final class FanoutDaemon {
    let pid: pid_t
    let directory: String
    let udp: SocketAddress
    /// The daemon's static public key, from its ready line (members pin it).
    let publicKey: [UInt8]
    /// Started with `--insecure-unsealed-benchmark`.
    let unsealed: Bool
    /// The ready line's own time (its `time=` field), wall-clock milliseconds.
    let readyWallMilliseconds: UInt64
    /// The web listener's port, when `--web` was among the arguments.
    private(set) var web: UInt16?
    /// Where the daemon's stderr goes (kept when the run fails).
    let logPath: String

    /// Bound on waiting for the daemon's ready line.
    static let readyLimitMicroseconds: UInt64 = 20_000_000

    struct StartFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// The `inkwired` binary in the directory of the running executable.
    static var binaryPath: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let exe = String(decoding: buffer[..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/inkwired"
    }

    /// Starts `inkwired` with limits raised for `sessions` sessions in `rooms` rooms of
    /// `members`, plus `extraArguments`, and waits for its ready line.
    /// `directory` (kept) and `udpAddress` let a restart reuse the data and the port.
    init(sessions: Int, rooms: Int, members: Int, extraArguments: [String] = [], binary: String? = nil,
         directory: String? = nil, udpAddress: String = "127.0.0.1:0") throws {
        let binary = binary ?? FanoutDaemon.binaryPath
        if let directory {
            self.directory = directory
        } else {
            var template = Array("/tmp/inkwire-bench-fanout-XXXXXX".utf8CString)
            guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { throw StartFailure(description: "mkdtemp failed") }
            self.directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        let directory = self.directory
        logPath = directory + "/stderr-\(UInt32.random(in: 0...UInt32.max)).log"
        let argv = [binary, "--udp", udpAddress, "--tcp", "off", "--data-dir", directory + "/data",
                    "--max-sessions", "\(sessions + 1024)", "--max-rooms", "\(max(rooms + 16, 1024))",
                    "--max-members", "\(max(members + 8, 256))", "--new-sessions-per-second", "100000",
                    "--log-level", "warning"] + extraArguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let cArgs = argv.map { strdup($0) } + [nil]
        var child = pid_t()
        let rc = posix_spawn(&child, binary, &actions, nil, cArgs, environ)
        cArgs.forEach { free($0) }
        posix_spawn_file_actions_destroy(&actions)
        guard rc == 0 else { throw StartFailure(description: "cannot start \(binary): \(String(cString: strerror(rc)))") }
        pid = child
        let limit = EventLoopClock.microseconds() + FanoutDaemon.readyLimitMicroseconds
        var found: SocketAddress?
        var key: [UInt8]?
        var readyAt: UInt64 = 0
        while found == nil && EventLoopClock.microseconds() < limit {
            usleep(5_000)
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                throw StartFailure(description: "inkwired exited at start (log \(logPath)): \(FanoutDaemon.tail(logPath))")
            }
            guard let text = FanoutDaemon.read(logPath) else { continue }
            for line in text.split(separator: "\n") where line.contains("msg=\"ready\"") {
                guard let range = line.range(of: " udp=") else { continue }
                let value = line[range.upperBound...].prefix { $0 != " " }.filter { $0 != "\"" }
                if let port = value.split(separator: ":").last.flatMap({ UInt16($0) }) { found = .loopbackIPv4(port: port) }
                key = BenchSecurity.publicKey(readyLine: line)
                readyAt = FanoutDaemon.wallMilliseconds(logLine: line) ?? 0
                if let w = line.range(of: " web=") {
                    web = line[w.upperBound...].prefix { $0 != " " }.split(separator: ":").last.flatMap { UInt16($0) }
                }
            }
        }
        guard let found, let key else {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
            throw StartFailure(description: "inkwired did not get ready (log \(logPath))")
        }
        udp = found
        publicKey = key
        unsealed = extraArguments.contains(BenchSecurity.unsealedDaemonArgument)
        readyWallMilliseconds = readyAt
    }

    /// The `time=YYYY-MM-DDTHH:MM:SS.mmmZ` field of a log line, as Unix milliseconds.
    static func wallMilliseconds(logLine line: Substring) -> UInt64? {
        guard let range = line.range(of: "time=") else { return nil }
        let text = line[range.upperBound...].prefix(24)
        let digits = text.map { $0 }
        guard digits.count == 24 else { return nil }
        func number(_ from: Int, _ count: Int) -> Int32 { Int32(String(digits[from..<(from + count)])) ?? 0 }
        var parts = tm()
        parts.tm_year = number(0, 4) - 1900
        parts.tm_mon = number(5, 2) - 1
        parts.tm_mday = number(8, 2)
        parts.tm_hour = number(11, 2)
        parts.tm_min = number(14, 2)
        parts.tm_sec = number(17, 2)
        let seconds = timegm(&parts)
        return UInt64(seconds) * 1000 + UInt64(number(20, 3))
    }

    /// Wall-clock Unix milliseconds now.
    static func wallMillisecondsNow() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }

    /// Ends the daemon with SIGKILL (a crash): nothing is said to anyone, the data stays.
    func crash() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// How members seal their sessions with this daemon.
    var security: BenchSecurity { .forDaemon(unsealed: unsealed, serverKey: publicKey) }

    /// User plus system CPU seconds of the daemon so far (every thread), from /proc/PID/stat.
    var cpuSeconds: Double { FanoutDaemon.cpuSeconds(pid: pid) }

    /// Peak resident set (VmHWM) in MB.
    var peakRSSMegabytes: Double {
        guard let text = FanoutDaemon.read("/proc/\(pid)/status") else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let kb = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) } ?? 0
            return kb / 1024
        }
        return 0
    }

    /// SIGTERM, wait, remove the scratch directory (unless `keepLog`).
    func stop(keepLog: Bool = false) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        let limit = EventLoopClock.microseconds() + 10_000_000
        while waitpid(pid, &status, WNOHANG) == 0 {
            if EventLoopClock.microseconds() > limit {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(10_000)
        }
        guard !keepLog else { return }
        var rm = pid_t()
        let argv: [String] = ["/bin/rm", "-rf", directory]
        let args = argv.map { strdup($0) } + [nil]
        if posix_spawn(&rm, "/bin/rm", nil, nil, args, environ) == 0 { waitpid(rm, &status, 0) }
        args.forEach { free($0) }
    }

    /// utime + stime of a process (fields 14 and 15 of /proc/PID/stat, after the command name).
    static func cpuSeconds(pid: pid_t) -> Double {
        guard let text = read("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3); utime is field 14, stime field 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Datagrams the kernel dropped on the UDP sockets bound to `ports` (receive buffer full),
    /// from the last column of /proc/net/udp.
    static func udpDrops(ports: Set<UInt16>) -> Int {
        guard let text = read("/proc/net/udp") else { return 0 }
        var drops = 0
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 12, let port = fields[1].split(separator: ":").last.flatMap({ UInt16($0, radix: 16) }),
                  ports.contains(port), let n = Int(fields[fields.count - 1]) else { continue }
            drops += n
        }
        return drops
    }

    static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func tail(_ path: String) -> String {
        String((read(path) ?? "").suffix(600))
    }
}

/// The monotonic clock the benchmark measures with (µs), the one `EventLoop.now` reads.
enum EventLoopClock {
    static func microseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }
}
