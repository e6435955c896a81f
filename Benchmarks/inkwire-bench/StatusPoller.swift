// The status page's load under the fan-out: GET /status.json from the daemon's web listener at a
// fixed rate on a thread of its own, timing each whole response (as the page's fetch does every 2 s).
import Foundation
import Glibc

final class StatusPoller: @unchecked Sendable {
    let port: UInt16
    let everyMilliseconds: Int
    private let lock = NSLock()
    private var running = false
    private var loads: [Double] = []
    private(set) var failures = 0
    private(set) var lastBytes = 0
    private var thread: Thread?

    init(port: UInt16, everyMilliseconds: Int) {
        self.port = port
        self.everyMilliseconds = everyMilliseconds
    }

    func start() {
        running = true
        let thread = Thread { [self] in
            var next = Date()
            while lock.withLock({ running }) {
                let started = Date()
                let bytes = fetch()
                let ms = Date().timeIntervalSince(started) * 1000
                lock.withLock {
                    if let bytes {
                        loads.append(ms)
                        lastBytes = bytes
                    } else {
                        failures += 1
                    }
                }
                next = next.addingTimeInterval(Double(everyMilliseconds) / 1000)
                let wait = next.timeIntervalSinceNow
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
            }
        }
        self.thread = thread
        thread.start()
    }

    /// Stops and returns the load times (ms).
    func stop() -> [Double] {
        lock.withLock { running = false }
        usleep(UInt32(min(everyMilliseconds, 2000) * 1000) + 200_000)
        return lock.withLock { loads }
    }

    /// One GET /status.json; the body's size, nil on failure.
    private func fetch() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { return nil }
        let request = Array("GET /status.json HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 10_000) > 0 else { return nil }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            response += buffer[..<n]
        }
        guard response.starts(with: Array("HTTP/1.1 200".utf8)), let split = response.firstRange(of: [13, 10, 13, 10]) else { return nil }
        return response.count - split.upperBound
    }
}
