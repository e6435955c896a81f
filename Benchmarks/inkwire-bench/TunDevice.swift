import Foundation
import Glibc

/// A layer-3 TUN device (`IFF_TUN | IFF_NO_PI`: each read or write is one bare IP packet),
/// created inside a network namespace and configured as one end of a point-to-point link.
/// The device lives as long as its descriptor: closing it deletes the device.
final class TunDevice: @unchecked Sendable {
    /// Interface name inside the namespace (each namespace has exactly one, so it can be fixed).
    static let interfaceName = "inkw0"
    /// The device's MTU: no packet read from it is larger.
    static let mtu = 1500
    /// Packets the kernel queues for the forwarder to read (the default 500 overflows in bursts
    /// sooner; what overflows is counted by `transmitDropped`, outside the seeded model).
    static let transmitQueueLength = 4096
    /// `TUNSETIFF` = `_IOW('T', 202, int)`.
    private static let setInterfaceRequest: UInt = 0x4004_54CA
    private static let iffTun: Int16 = 0x0001
    private static let iffNoPI: Int16 = 0x1000

    let fd: Int32
    let namespace: NetworkNamespace

    private init(fd: Int32, namespace: NetworkNamespace) {
        self.fd = fd
        self.namespace = namespace
    }

    /// Creates the device in `namespace`, turns IPv6 off there (so the kernel sends nothing of
    /// its own through the link), gives it `local` with `peer` at the other end, and brings it
    /// and the namespace's loopback up. The descriptor is non-blocking.
    static func create(in namespace: NetworkNamespace, local: String, peer: String) throws -> TunDevice {
        let fd: Int32 = try namespace.run { () throws(NetworkNamespace.Failure) -> Int32 in
            // Per-namespace sysctls: this thread sees the namespace's /proc/sys/net.
            for file in ["default", "all"] { writeSysctl("/proc/sys/net/ipv6/conf/\(file)/disable_ipv6", "1") }
            let fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { throw NetworkNamespace.Failure(description: "open /dev/net/tun: \(String(cString: strerror(errno)))") }
            // struct ifreq: 16 name bytes, then the flags (short) in the union.
            var request = [UInt8](repeating: 0, count: 40)
            for (index, byte) in interfaceName.utf8.enumerated() { request[index] = byte }
            withUnsafeBytes(of: iffTun | iffNoPI) { flags in request.replaceSubrange(16..<18, with: flags) }
            let rc = request.withUnsafeMutableBytes { ioctl(fd, setInterfaceRequest, $0.baseAddress!) }
            guard rc == 0 else {
                let message = String(cString: strerror(errno))
                Glibc.close(fd)
                throw NetworkNamespace.Failure(description: "TUNSETIFF \(interfaceName): \(message)")
            }
            return fd
        }
        let device = TunDevice(fd: fd, namespace: namespace)
        do {
            let n = ["-n", namespace.name]
            try IPCommand.run(n + ["link", "set", "lo", "up"])
            try IPCommand.run(n + ["addr", "add", local, "peer", peer, "dev", interfaceName])
            try IPCommand.run(n + ["link", "set", interfaceName, "mtu", "\(mtu)", "txqueuelen", "\(transmitQueueLength)", "up"])
        } catch {
            device.close()
            throw error
        }
        return device
    }

    /// Packets the namespace's kernel dropped on the way into this device because the forwarder
    /// had not read the queue in time (`/proc/net/dev` transmit drops); nil when unreadable.
    func transmitDropped() -> Int? {
        try? namespace.run { () -> Int? in
            // thread-self: /proc/self/net would show the main thread's namespace.
            guard let text = try? String(contentsOfFile: "/proc/thread-self/net/dev", encoding: .utf8) else { return nil }
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == TunDevice.interfaceName else { continue }
                let fields = parts[1].split(separator: " ")
                // receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes packets errs drop ...
                return fields.count > 11 ? Int(fields[11]) : nil
            }
            return nil
        } ?? nil
    }

    /// Closes the descriptor, which deletes the device. Call once.
    func close() { _ = Glibc.close(fd) }

    /// Writes a sysctl of the calling thread's namespace; returns 0 or the errno (ENOENT: no
    /// such setting, e.g. no IPv6 in this kernel, which then has nothing to turn off).
    @discardableResult
    static func writeSysctl(_ path: String, _ value: String) -> Int32 {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { Glibc.close(fd) }
        return value.withCString { write(fd, $0, strlen($0)) } == value.utf8.count ? 0 : errno
    }
}
