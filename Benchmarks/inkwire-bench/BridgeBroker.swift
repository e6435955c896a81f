import Glibc
import InkUV

/// A real `mosquitto` on 127.0.0.1 for the bridge benchmark: a free port (probed by binding
/// port 0; retried if another process takes it first), a minimal config in a scratch
/// directory, stopped with SIGTERM then SIGKILL.
final class BridgeBroker {
    static let binaryPath = "/usr/sbin/mosquitto"
    /// Bound on waiting for the broker to accept connections.
    static let startLimitMicroseconds: UInt64 = 5_000_000
    /// Ports tried before giving up.
    static let startAttempts = 5

    static var isInstalled: Bool { access(binaryPath, X_OK) == 0 }

    let port: UInt16
    let pid: pid_t
    let directory: String

    /// `noDelay` sets mosquitto's `set_tcp_nodelay` (Nagle off on its client sockets).
    init(noDelay: Bool = false) throws {
        var template = Array("/tmp/inkwire-bench-mosquitto-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw FanoutDaemon.StartFailure(description: "mkdtemp failed")
        }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var lastError = "no attempt"
        for _ in 0..<BridgeBroker.startAttempts {
            let candidate = BridgeBroker.freePort()
            let config = "listener \(candidate) 127.0.0.1\nallow_anonymous true\npersistence false\n" + (noDelay ? "set_tcp_nodelay true\n" : "")
            guard let file = fopen(directory + "/mosquitto.conf", "w") else { break }
            fputs(config, file)
            fclose(file)
            let log = open(directory + "/broker.log", O_WRONLY | O_CREAT | O_APPEND, 0o600)
            let child: pid_t
            do {
                child = try ChildProcess.spawn([BridgeBroker.binaryPath, "-c", directory + "/mosquitto.conf"],
                                               environment: nil, stdout: log, stderr: log)
            } catch {
                close(log)
                throw FanoutDaemon.StartFailure(description: "\(error)")
            }
            close(log)
            let deadline = EventLoopClock.microseconds() + BridgeBroker.startLimitMicroseconds
            var exited = false
            while EventLoopClock.microseconds() < deadline {
                var status: Int32 = 0
                if waitpid(child, &status, WNOHANG) == child {
                    exited = true
                    break
                }
                if BridgeBroker.accepts(port: candidate) {
                    port = candidate
                    pid = child
                    return
                }
                usleep(20_000)
            }
            if !exited { ChildProcess.end([child], graceMicroseconds: 1_000_000) }
            lastError = "mosquitto did not accept on port \(candidate): \(FanoutDaemon.tail(directory + "/broker.log"))"
        }
        throw FanoutDaemon.StartFailure(description: lastError)
    }

    func stop() {
        ChildProcess.end([pid], graceMicroseconds: 2_000_000)
        var status: Int32 = 0
        var rm = pid_t()
        let words: [String] = ["/bin/rm", "-rf", directory]
        let argv = words.map { strdup($0) } + [nil]
        if posix_spawn(&rm, "/bin/rm", nil, nil, argv, environ) == 0 { waitpid(rm, &status, 0) }
        argv.forEach { free($0) }
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago.
    static func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var address = loopback(0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    static func accepts(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    static func loopback(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

/// Reads a daemon's Prometheus text from `GET /metrics` (blocking, bounded) and keeps the
/// samples whose name contains `filter`, one value per name (labels dropped): counters
/// (`_total`) summed, other samples (gauges such as a reorder depth) the largest.
enum BridgeMetricsScrape {
    /// Largest response read.
    static let maximumResponseBytes = 4 << 20
    /// Receive/send timeout of the scrape socket, seconds.
    static let timeoutSeconds = 3

    static func samples(port: UInt16, filter: String) -> [String: Double] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return [:] }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = BridgeBroker.loopback(port)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return [:] }
        let request = Array("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while response.count < maximumResponseBytes {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            response += chunk[..<n]
        }
        return parse(String(decoding: response, as: UTF8.self), filter: filter)
    }

    /// `name{labels} value` lines (comments skipped), merged per name as above.
    static func parse(_ text: String, filter: String) -> [String: Double] {
        var sums: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && line.contains(filter) {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[parts.count - 1].filter { $0 != "\r" }) else { continue }
            let name = String(parts[0].prefix { $0 != "{" })
            if name.hasSuffix("_total") { sums[name, default: 0] += value } else { sums[name] = max(sums[name] ?? value, value) }
        }
        return sums
    }
}
