import Glibc
import InkUV

/// Test bound on how long one scenario may run the loop.
let scenarioLimitMicroseconds: UInt64 = 5_000_000

/// Runs `loop` until `done()` holds or the time limit passes; returns `done()`.
@discardableResult
func drive(_ loop: EventLoop, limitMicroseconds: UInt64 = scenarioLimitMicroseconds, until done: () -> Bool) -> Bool {
    let deadline = loop.now + limitMicroseconds
    let guardTimer = try! LoopTimer(loop: loop)
    guardTimer.start(atMicroseconds: deadline) {}
    while !done() && loop.now < deadline {
        loop.runOnce()
    }
    guardTimer.close()
    loop.runNoWait()
    return done()
}

/// A unix datagram socket the test owns, standing in for systemd's notification socket.
final class FakeNotifySocket {
    let fd: Int32
    /// The value for NOTIFY_SOCKET (`@name` for the abstract namespace).
    let address: String
    private let path: String?

    init(abstract: Bool, tag: String) {
        let name = "inkwire-test-\(getpid())-\(tag)"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        precondition(fd >= 0)
        var bytes: [UInt8]
        if abstract {
            address = "@" + name
            path = nil
            bytes = [0] + Array(name.utf8)
        } else {
            let file = "/tmp/\(name).sock"
            unlink(file)
            address = file
            path = file
            bytes = Array(file.utf8) + [0]
        }
        var sun = sockaddr_un()
        sun.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &sun.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
        let rc = withUnsafePointer(to: &sun) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        precondition(rc == 0, "bind \(address): \(String(cString: strerror(errno)))")
    }

    deinit {
        close(fd)
        if let path { unlink(path) }
    }

    /// The next datagram, or nil if none is waiting.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}
