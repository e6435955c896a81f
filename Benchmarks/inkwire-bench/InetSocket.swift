import Glibc

/// Plain IPv4 sockets by descriptor, for code that opens them inside a `PacketLink` namespace
/// (`link.run(in:)`) and uses them from anywhere (the probe and the tests).
enum InetSocket {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ operation: String) { description = "\(operation): \(String(cString: strerror(errno)))" }
    }

    static func address(_ host: String, _ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    /// A UDP socket bound to `host:port` (port 0 picks one).
    static func udp(bind host: String, port: UInt16 = 0) throws(Failure) -> Int32 {
        try bound(Int32(SOCK_DGRAM.rawValue), host, port)
    }

    /// A listening TCP socket on `host:port`.
    static func tcpListener(bind host: String, port: UInt16 = 0) throws(Failure) -> Int32 {
        let fd = try bound(Int32(SOCK_STREAM.rawValue), host, port)
        guard listen(fd, 16) == 0 else {
            let failure = Failure("listen")
            close(fd)
            throw failure
        }
        return fd
    }

    /// An unconnected TCP socket (connect it with `connect(_:to:port:)`).
    static func tcp() throws(Failure) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket") }
        return fd
    }

    static func connect(_ fd: Int32, to host: String, port: UInt16) throws(Failure) {
        var target = address(host, port)
        let rc = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw Failure("connect \(host):\(port)") }
    }

    static func localPort(_ fd: Int32) -> UInt16 {
        var local = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: local.sin_port)
    }

    /// Sends `bytes` as one datagram to `host:port`; false when the kernel refused it.
    static func send(_ fd: Int32, _ bytes: [UInt8], to host: String, port: UInt16) -> Bool {
        var target = address(host, port)
        let sent = withUnsafePointer(to: &target) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { to in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, to, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        return sent == bytes.count
    }

    /// Sets a receive timeout so blocking reads give up.
    static func setReceiveTimeout(_ fd: Int32, microseconds: Int) {
        var timeout = timeval(tv_sec: microseconds / 1_000_000, tv_usec: microseconds % 1_000_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func bound(_ type: Int32, _ host: String, _ port: UInt16) throws(Failure) -> Int32 {
        let fd = socket(AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var local = address(host, port)
        let rc = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let failure = Failure("bind \(host):\(port)")
            close(fd)
            throw failure
        }
        return fd
    }
}
