import Glibc
import Testing

/// The real `inkwired` binary, started as a child process on loopback. Its stderr goes to a
/// file the test reads (no pipe that could fill and stall the daemon).
final class DaemonProcess {
    let pid: pid_t
    let logPath: String
    let dataDir: String
    private(set) var exitStatus: Int32?
    /// Whether `dataDir` was made for this process (removed with it).
    private let ownsDirectory: Bool

    /// Bound on waiting for the ready line or an exit.
    static let startLimitMicroseconds: UInt64 = 10_000_000

    /// The binary next to the test bundle (`.build/<config>/inkwired`).
    static var binaryPath: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let exe = count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let directory = exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return directory + "/inkwired"
    }

    /// A fresh scratch directory under /tmp.
    static func scratchDirectory(_ tag: String) -> String {
        var template = Array("/tmp/inkwired-test-\(tag)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Starts `inkwired arguments` (with `--data-dir` added unless given) and waits for it to
    /// be ready (or to exit, for configuration errors when `waitReady` is false).
    /// `passing` sockets become descriptors 3, 4... with `LISTEN_PID` set to the daemon's pid
    /// (through `sh -c 'LISTEN_PID=$$ exec ...'`), as systemd socket activation does.
    init(_ arguments: [String], environment: [String: String] = [:], dataDir: String? = nil, tag: String = "daemon",
         passing sockets: [Int32] = []) throws {
        let directory = dataDir ?? DaemonProcess.scratchDirectory(tag)
        self.dataDir = directory
        ownsDirectory = dataDir == nil
        logPath = directory + "/stderr-\(UInt32.random(in: 0...UInt32.max)).log"
        var argv = [DaemonProcess.binaryPath]
        if !arguments.contains("--data-dir") { argv += ["--data-dir", directory + "/data"] }
        argv += arguments
        if !sockets.isEmpty { argv = ["/bin/sh", "-c", "LISTEN_PID=$$ exec \"$0\" \"$@\""] + argv }
        var env = environment
        if env["PATH"] == nil { env["PATH"] = "/usr/bin:/bin" }
        pid = try ChildSpawn.spawn(argv, environment: env, redirects: [
            (2, .file(logPath)), (1, .file(logPath + ".out")), (0, .file("/dev/null")),
        ], inherited: sockets)
    }

    deinit {
        if exitStatus == nil {
            kill(pid, SIGKILL)
            _ = waitExit()
        }
        if ownsDirectory && dataDir.hasPrefix("/tmp/inkwired-test-") { _ = system("rm -rf '\(dataDir)'") }
    }

    struct SpawnError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// Everything the daemon logged so far.
    var log: String {
        String(decoding: readFile(logPath), as: UTF8.self)
    }

    var standardOutput: String { String(decoding: readFile(logPath + ".out"), as: UTF8.self) }

    /// Waits for a log line containing `text`; returns it.
    func waitForLine(containing text: String, limitMicroseconds: UInt64 = startLimitMicroseconds) -> String? {
        let deadline = monotonicMicroseconds() + limitMicroseconds
        repeat {
            if let line = log.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line) }
            if exitStatus != nil || pollExit() != nil {
                return log.split(separator: "\n").first(where: { $0.contains(text) }).map(String.init)
            }
            usleep(5_000)
        } while monotonicMicroseconds() < deadline
        return nil
    }

    /// The `msg="ready"` line's fields (`udp`, `tcp`, `legacy`, `metrics`...).
    func ready() throws -> [String: String] {
        guard let line = waitForLine(containing: "msg=\"ready\"") else {
            throw SpawnError(message: "no ready line; log:\n\(log)")
        }
        return parseLogfmt(line)
    }

    /// The first `HOST:PORT` of the ready line's `legacy` field (`ADDR=ROOM,...`).
    func legacyPort(_ fields: [String: String], index: Int = 0) -> UInt16 {
        let entries = fields["legacy", default: ""].split(separator: ",")
        let address = entries[index].split(separator: "=")[0]
        return UInt16(address.split(separator: ":").last!)!
    }

    static func port(_ address: String?) -> UInt16? {
        address.flatMap { $0.split(separator: ":").last.flatMap { UInt16($0) } }
    }

    func signal(_ signum: Int32) { kill(pid, signum) }

    /// Exit code if the process has exited (reaped).
    func pollExit() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        guard rc == pid else { return nil }
        exitStatus = decode(status)
        return exitStatus
    }

    /// Waits for the process to exit; its exit code (128+n for a signal), nil on time-out.
    @discardableResult
    func waitExit(limitMicroseconds: UInt64 = startLimitMicroseconds) -> Int32? {
        let deadline = monotonicMicroseconds() + limitMicroseconds
        while monotonicMicroseconds() < deadline {
            if let code = pollExit() { return code }
            usleep(5_000)
        }
        return nil
    }

    private func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}

/// Parses `key=value key="quoted value"` (the subset the daemon's Logger writes).
func parseLogfmt(_ line: String) -> [String: String] {
    var fields: [String: String] = [:]
    var scalars = Substring(line).unicodeScalars[...]
    while !scalars.isEmpty {
        while scalars.first == " " { scalars.removeFirst() }
        var key = ""
        while let c = scalars.first, c != "=", c != " " { key.unicodeScalars.append(c); scalars.removeFirst() }
        guard scalars.first == "=" else { continue }
        scalars.removeFirst()
        var value = ""
        if scalars.first == "\"" {
            scalars.removeFirst()
            while let c = scalars.first, c != "\"" {
                scalars.removeFirst()
                if c == "\\", let next = scalars.first { value.unicodeScalars.append(next); scalars.removeFirst() } else { value.unicodeScalars.append(c) }
            }
            if !scalars.isEmpty { scalars.removeFirst() }
        } else {
            while let c = scalars.first, c != " " { value.unicodeScalars.append(c); scalars.removeFirst() }
        }
        fields[key] = value
    }
    return fields
}

func readFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 { return out }
        out.append(contentsOf: chunk[..<n])
    }
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}
