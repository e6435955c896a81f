import Testing
import InkUV
@testable import InkDaemon

/// The daemon's retransmission ceiling lands on accepted streams; 0 leaves the kernel's; a
/// kernel without TCP_RTO_MAX_MS (before Linux 6.15) is logged once, never per connection.
@Suite(.serialized) struct TCPRetransmitPolicyTests {
    final class Lines: @unchecked Sendable { var all: [String] = [] }

    @Test func acceptedStreamsGetTheCeilingAndZeroKeepsTheKernels() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let lines = Lines()
        let policy = TCPRetransmitPolicy(ceilingMs: 2000, logger: Logger(level: .debug, sink: { lines.all.append($0) }))
        let listener = try TCPListener(loop: loop, bindTo: try SocketAddress.parse("127.0.0.1:0"))
        var accepted: [TCPConnection] = []
        try listener.listen { connection in
            policy.apply(to: connection)
            accepted.append(connection)
        }
        var devices: [TCPConnection] = []
        for ceiling: UInt32 in [2000, 0] {
            policy.ceilingMs = ceiling
            try TCPConnection.connect(loop: loop, to: try #require(listener.localAddress)) { result in
                if case .success(let connection) = result { devices.append(connection) }
            }
            let want = devices.count + 1
            let deadline = loop.now + 5_000_000
            while (accepted.count < want || devices.count < want) && loop.now < deadline { loop.runOnce() }
        }
        try #require(accepted.count == 2)
        if let first = accepted[0].retransmitCeilingMilliseconds {
            #expect(first == 2000)
            #expect(accepted[1].retransmitCeilingMilliseconds == tcpKernelRetransmitCeilingMs)
            #expect(lines.all.isEmpty)
        } else {
            // An older kernel: one notice for both connections, none for the one left alone.
            #expect(lines.all.filter { $0.contains("TCP_RTO_MAX_MS") }.count == 1)
        }
        for connection in accepted + devices { connection.close() }
        listener.close()
        loop.runNoWait()
    }
}
