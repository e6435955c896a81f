import Glibc
import InkCodec

/// A raw TCP socket that sends legacy frames and bytes no app would (hostile, silent or
/// heartbeat-less devices). It reads only to notice the daemon closing; what the daemon writes
/// for apps is checked with the app model (`LegacyAppRunner`), never with a clean reader.
final class RawLegacySocket {
    let fd: Int32
    private(set) var peerClosed = false

    init(port: UInt16) throws {
        fd = try connectLoopback(port: port, type: SOCK_STREAM)
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
/// A connected (TCP) or unconnected (UDP, `connect`ed for `send`) loopback socket.
func connectLoopback(port: UInt16, type: __socket_type) throws -> Int32 {
    let fd = socket(AF_INET, Int32(type.rawValue), 0)
    guard fd >= 0 else { throw DaemonProcess.SpawnError(message: "socket failed") }
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

/// `GET /metrics` from the daemon, the body as text.
func fetchMetrics(port: UInt16) throws -> String {
    let fd = try connectLoopback(port: port, type: SOCK_STREAM)
    defer { close(fd) }
    let request = Array("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    let deadline = monotonicMicroseconds() + 3_000_000
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
        return String(decoding: response, as: UTF8.self)
    }
    return String(decoding: response[(split + 4)...], as: UTF8.self)
}

/// The value of one sample line (`name{labels} value`) in Prometheus text, if present.
func metricValue(_ text: String, _ series: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1))
    }
    return nil
}
