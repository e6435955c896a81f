import Glibc
import InkCodec

/// A raw TCP socket that sends legacy frames and bytes no app would (hostile, silent or
/// heartbeat-less devices). It reads only to notice the daemon closing; what the daemon writes
/// for apps is checked with the app model (`LegacyAppRunner`), never with a clean reader.
final class RawLegacySocket {
    let fd: Int32
    private(set) var peerClosed = false

    /// To `127.0.0.1:port`, from `127.0.0.1` or another loopback address (`source`, e.g.
    /// "127.0.0.2": another host as the daemon's quotas see it).
    init(port: UInt16, from source: String? = nil) throws {
        fd = try connectLoopback(port: port, type: SOCK_STREAM, from: source)
    }

    /// From `[::1]` to `[::1]:ipv6Port`.
    init(ipv6Port: UInt16) throws {
        fd = try connectLoopbackIPv6(port: ipv6Port)
    }

    deinit { close(fd) }

    func send(_ texts: [String]) {
        var bytes: [UInt8] = []
        for text in texts { LegacyFrame.data(command: LegacyFrame.textCommand, payload: Array(text.utf8)).append(to: &bytes) }
        sendRaw(bytes)
    }

    func sendHeartbeat() { sendRaw(LegacyFrame.heartbeat.bytes) }

    func sendRaw(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Waits until the daemon closes the connection (its bytes are discarded); true if it did.
    func waitClosed(limitMicroseconds: UInt64) -> Bool {
        let deadline = monotonicMicroseconds() + limitMicroseconds
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !peerClosed && monotonicMicroseconds() < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) > 0 else { continue }
            if recv(fd, &buffer, buffer.count, 0) <= 0 { peerClosed = true }
        }
        return peerClosed
    }
}
/// A connected (TCP) or unconnected (UDP, `connect`ed for `send`) socket to `127.0.0.1:port`,
/// from `source` when given: any address of 127.0.0.0/8 is this host's, so each stands for
/// another device on the classroom network (the daemon's per-address quotas tell them apart).
func connectLoopback(port: UInt16, type: __socket_type, from source: String? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(type.rawValue), 0)
    guard fd >= 0 else { throw DaemonProcess.SpawnError(message: "socket failed") }
    if let source {
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        guard inet_pton(AF_INET, source, &local.sin_addr) == 1 else {
            close(fd)
            throw DaemonProcess.SpawnError(message: "not an IPv4 address: \(source)")
        }
        let bound = withUnsafePointer(to: &local) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            throw DaemonProcess.SpawnError(message: "bind \(source): \(String(cString: strerror(errno)))")
        }
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    let rc = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else {
        close(fd)
        throw DaemonProcess.SpawnError(message: "connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
    }
    return fd
}

/// A TCP stream to `[::1]:port`.
func connectLoopbackIPv6(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw DaemonProcess.SpawnError(message: "socket failed") }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_port = port.bigEndian
    withUnsafeMutableBytes(of: &address.sin6_addr) { $0[15] = 1 }
    let rc = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
    }
    guard rc == 0 else {
        close(fd)
        throw DaemonProcess.SpawnError(message: "connect [::1]:\(port): \(String(cString: strerror(errno)))")
    }
    return fd
}

/// One HTTP/1.1 response, as `httpGet` read it.
struct HTTPReply {
    /// The status line's code (0: no status line came).
    var status: Int
    /// Everything before the blank line: status line and headers.
    var head: String
    var body: String
    /// The whole response as text.
    var text: String { head + "\r\n\r\n" + body }
}

/// `GET path` over a fresh connection to `127.0.0.1:port` (from `source`, see
/// `connectLoopback`), read until the server closes or `limitMicroseconds` pass.
func httpGet(port: UInt16, path: String, from source: String? = nil, limitMicroseconds: UInt64 = 5_000_000) throws -> HTTPReply {
    let fd = try connectLoopback(port: port, type: SOCK_STREAM, from: source)
    defer { close(fd) }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    let deadline = monotonicMicroseconds() + limitMicroseconds
    while monotonicMicroseconds() < deadline {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 100) > 0 else { continue }
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response.append(contentsOf: buffer[..<n])
    }
    let separator: [UInt8] = [13, 10, 13, 10]
    guard response.count >= 4,
          let split = (0...(response.count - 4)).first(where: { Array(response[$0..<($0 + 4)]) == separator }) else {
        return HTTPReply(status: 0, head: String(decoding: response, as: UTF8.self), body: "")
    }
    let head = String(decoding: response[..<split], as: UTF8.self)
    let statusLine = head.split(separator: "\r\n", maxSplits: 1).first ?? ""
    let code = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return HTTPReply(status: code, head: head, body: String(decoding: response[(split + 4)...], as: UTF8.self))
}

/// `GET /metrics` from the daemon, the body as text.
func fetchMetrics(port: UInt16) throws -> String {
    try httpGet(port: port, path: "/metrics", limitMicroseconds: 3_000_000).body
}

/// The value of one sample line (`name{labels} value`) in Prometheus text, if present.
func metricValue(_ text: String, _ series: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1))
    }
    return nil
}
