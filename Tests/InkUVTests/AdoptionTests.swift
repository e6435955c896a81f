import Testing
import Glibc
import InkUV

/// Systemd socket activation hands over already bound sockets; InkUV adopts them.
@Suite(.serialized) struct AdoptionTests {
    /// A socket made with plain socket()/bind() (and listen() for TCP) on 127.0.0.1, port 0.
    func boundSocket(type: Int32, listen: Bool) throws -> (fd: Int32, address: SocketAddress) {
        let fd = socket(AF_INET, type, 0)
        try #require(fd >= 0)
        let rc = SocketAddress.loopbackIPv4(port: 0).withSockAddr { Glibc.bind(fd, $0, $1) }
        try #require(rc == 0)
        if listen { try #require(Glibc.listen(fd, 16) == 0) }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let address = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                getsockname(fd, sa, &length) == 0 ? SocketAddress(sa) : nil
            }
        }
        return (fd, try #require(address))
    }

    @Test func adoptsAUDPSocket() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (fd, address) = try boundSocket(type: Int32(SOCK_DGRAM.rawValue), listen: false)
        let adopted = try UDPSocket(loop: loop, adopting: fd)
        #expect(try adopted.localAddress == address)
        #expect(adopted.usesRecvmmsg)
        try adopted.startReceiving { bytes, sender in _ = try? adopted.send(bytes, to: sender) }
        let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        var reply: [UInt8]?
        try client.startReceiving { bytes, _ in reply = Array(bytes) }
        try client.send(Array("adopted".utf8), to: address)
        #expect(drive(loop) { reply != nil })
        #expect(reply == Array("adopted".utf8))
    }

    @Test func adoptsAListeningTCPSocket() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (fd, address) = try boundSocket(type: Int32(SOCK_STREAM.rawValue), listen: true)
        let listener = try TCPListener(loop: loop, adopting: fd)
        #expect(listener.localAddress == address)
        var accepted = 0
        try listener.listen { connection in
            accepted += 1
            _ = try? connection.write(Array("hi".utf8))
            connection.shutdown { _ in connection.close() }
        }
        var received: [UInt8] = []
        var ended = false
        try TCPConnection.connect(loop: loop, to: address) { result in
            guard let connection = try? result.get() else { return }
            try? connection.startReading({ received.append(contentsOf: $0) }, onEnd: { _ in
                ended = true
                connection.close()
            })
        }
        #expect(drive(loop) { ended })
        #expect(accepted == 1)
        #expect(received == Array("hi".utf8))
    }

    @Test func adoptingABadDescriptorIsATypedError() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        #expect(throws: UVError.self) { _ = try TCPListener(loop: loop, adopting: -1) }
        loop.runNoWait()
        #expect(loop.openHandleCount == 0)
    }
}
