import Testing
import InkUV

/// TCP_RTO_MAX_MS (Linux 6.15+): set on a listener (inherited by what it accepts) and on both
/// ends of a loopback stream, and read back. On an
/// older kernel the setter reports `optionUnsupported` and the test stops there.
@Suite(.serialized) struct TCPRetransmitCeilingTests {
    @Test func ceilingIsSetOnBothEndsAndReadBack() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let listener = try TCPListener(loop: loop, bindTo: try SocketAddress.parse("127.0.0.1:0"))
        // Set on the listener, it is what accepted connections start with (on kernels that know it).
        let onListener = Result { () throws(UVError) in try listener.setRetransmitCeiling(milliseconds: 1800) }
        var accepted: TCPConnection?
        try listener.listen { accepted = $0 }
        var client: TCPConnection?
        try TCPConnection.connect(loop: loop, to: try #require(listener.localAddress)) { result in
            if case .success(let connection) = result { client = connection }
        }
        #expect(drive(loop) { accepted != nil && client != nil })
        let server = try #require(accepted)
        let device = try #require(client)
        if case .success = onListener { #expect(server.retransmitCeilingMilliseconds == 1800) }
        let result = Result { () throws(UVError) in try server.setRetransmitCeiling(milliseconds: 2000) }
        if case .failure(let error) = result {
            #expect(error.code == UVError.optionUnsupported)
            #expect(server.retransmitCeilingMilliseconds == nil)
            return
        }
        try device.setRetransmitCeiling(milliseconds: 1500)
        #expect(server.retransmitCeilingMilliseconds == 2000)
        #expect(device.retransmitCeilingMilliseconds == 1500)
        // The kernel's range is 1 ms to 120 s: outside it is a typed error and nothing changes.
        for outOfRange: UInt32 in [0, tcpKernelRetransmitCeilingMs + 1] {
            let refused = Result { () throws(UVError) in try device.setRetransmitCeiling(milliseconds: outOfRange) }
            #expect(throws: UVError.self) { try refused.get() }
        }
        #expect(device.retransmitCeilingMilliseconds == 1500)
        device.close()
        server.close()
        #expect(device.retransmitCeilingMilliseconds == nil)
        listener.close()
        loop.runNoWait()
        #expect(loop.openHandleCount == 0)
    }
}
