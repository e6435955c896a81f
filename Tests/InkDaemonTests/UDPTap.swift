import Foundation
import Glibc

/// The shared classroom Wi-Fi, on loopback: a UDP relay between one device and the daemon
/// that records every datagram both ways (an eavesdropper's view) and lets the test act on
/// each device datagram before it is passed on (an attacker racing the device), or put any
/// datagram toward the device. The device sends to `port`; the daemon sees the tap's other
/// socket as the device's address. It runs on its own thread until `stop`.
final class UDPTap: @unchecked Sendable {
    let port: UInt16
    private let front: Int32
    private let back: Int32
    private let daemonPort: UInt16
    private let lock = NSLock()
    private var deviceAddress: sockaddr_in?
    private var recordedToDaemon: [[UInt8]] = []
    private var recordedToDevice: [[UInt8]] = []
    private var stopped = false
    private var thread: Thread?
    /// Called with each device datagram before the tap forwards it (on the tap's thread).
    private var hook: (([UInt8]) -> Void)?

    init(daemonPort: UInt16) throws {
        self.daemonPort = daemonPort
        let fd = try UDPTap.bound()
        front = fd
        back = try connectLoopback(port: daemonPort, type: SOCK_DGRAM)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = UInt16(bigEndian: address.sin_port)
    }

    /// Starts relaying (on the tap's thread).
    func start() {
        let thread = Thread { [self] in self.loop() }
        self.thread = thread
        thread.start()
    }

    deinit {
        close(front)
        close(back)
    }

    /// An unconnected UDP socket on 127.0.0.1, port chosen by the OS.
    static func bound() throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard fd >= 0, rc == 0 else { throw DaemonProcess.SpawnError(message: "bind failed") }
        return fd
    }

    var toDaemon: [[UInt8]] { lock.withLock { recordedToDaemon } }
    var toDevice: [[UInt8]] { lock.withLock { recordedToDevice } }

    func onDeviceDatagram(_ body: (([UInt8]) -> Void)?) { lock.withLock { hook = body } }

    /// Sends `bytes` to the device as if from the daemon.
    func injectToDevice(_ bytes: [UInt8]) {
        guard var to = lock.withLock({ deviceAddress }) else { return }
        _ = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &to) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(front, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
    }

    func stop() {
        lock.withLock { stopped = true }
        while thread?.isFinished == false { usleep(1000) }
    }

    private func loop() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !lock.withLock({ stopped }) {
            var fds = [pollfd(fd: front, events: Int16(POLLIN), revents: 0), pollfd(fd: back, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, 20) > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                var from = sockaddr_in()
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let n = withUnsafeMutablePointer(to: &from) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(front, &buffer, buffer.count, 0, $0, &length) }
                }
                if n > 0 {
                    let datagram = Array(buffer[..<n])
                    let body = lock.withLock { () -> (([UInt8]) -> Void)? in
                        deviceAddress = from
                        recordedToDaemon.append(datagram)
                        return hook
                    }
                    body?(datagram)
                    _ = datagram.withUnsafeBytes { send(back, $0.baseAddress, $0.count, 0) }
                }
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                let n = recv(back, &buffer, buffer.count, 0)
                if n > 0 {
                    let datagram = Array(buffer[..<n])
                    lock.withLock { recordedToDevice.append(datagram) }
                    injectToDevice(datagram)
                }
            }
        }
    }
}
