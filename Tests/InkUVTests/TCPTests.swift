import Testing
import Glibc
import InkUV

@Suite(.serialized) struct TCPTests {
    /// An echo server that echoes every chunk and closes when the peer ends.
    func startEchoServer(_ loop: EventLoop, on address: SocketAddress) throws -> TCPListener {
        let listener = try TCPListener(loop: loop, bindTo: address)
        try listener.listen { connection in
            try? connection.setNoDelay(true)
            try? connection.startReading({ bytes in
                _ = try? connection.write(bytes)
            }, onEnd: { _ in
                connection.shutdown { _ in connection.close() }
            })
        }
        return listener
    }

    @Test(arguments: ["127.0.0.1:0", "[::1]:0"])
    func echoWithSplitWrites(bindText: String) throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let listener = try startEchoServer(loop, on: try SocketAddress.parse(bindText))
        let serverAddress = try #require(listener.localAddress)
        #expect(serverAddress.port != 0)
        let message = payload(1, length: 10_000)
        var echoed: [UInt8] = []
        var ended = false
        var connected: TCPConnection?
        try TCPConnection.connect(loop: loop, to: serverAddress) { result in
            guard case .success(let connection) = result else {
                Issue.record("connect failed: \(result)")
                return
            }
            connected = connection
            #expect(connection.remoteAddress == serverAddress)
            #expect(connection.localAddress?.family == serverAddress.family)
            try? connection.startReading({ echoed.append(contentsOf: $0) }, onEnd: { error in
                #expect(error == nil)
                ended = true
            })
            // Uneven pieces, including a one-byte write.
            var offset = 0
            for size in [1, 999, 4000, 5000] {
                _ = try? connection.write(Array(message[offset..<offset + size]))
                offset += size
            }
        }
        #expect(drive(loop) { echoed.count == message.count })
        #expect(echoed == message)
        connected?.shutdown()
        #expect(drive(loop) { ended })
        connected?.close()
        listener.close()
        loop.runNoWait()
        #expect(loop.openHandleCount == 0)
    }

    /// A reader that does not read makes the writer queue; once it reads, everything arrives in
    /// order, `onDrain` fires, and the queue bound refuses writes without corrupting the stream.
    @Test func largeWritesWithBackpressure() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let listener = try TCPListener(loop: loop, bindTo: .loopbackIPv4(port: 0))
        var serverSide: TCPConnection?
        try listener.listen { serverSide = $0 }
        var client: TCPConnection?
        try TCPConnection.connect(loop: loop, to: try #require(listener.localAddress)) { result in
            client = try? result.get()
        }
        #expect(drive(loop) { client != nil && serverSide != nil })
        let writer = try #require(client)
        let chunk = 64 * 1024
        writer.maximumQueuedWriteBytes = 1024 * 1024
        var drained = 0
        writer.onDrain = { drained += 1 }
        var sent: [UInt8] = []
        var maxQueued = 0
        var refused = false
        var index = 0
        let pattern = payload(0, length: chunk)
        while !refused && index < 1000 {
            // Each chunk differs in its first bytes, so a misplaced chunk is caught.
            var piece = pattern
            piece[0] = UInt8(truncatingIfNeeded: index)
            piece[1] = UInt8(truncatingIfNeeded: index >> 8)
            do {
                maxQueued = max(maxQueued, try writer.write(piece))
                sent.append(contentsOf: piece)
            } catch {
                #expect(error.code == UVError.noBufferSpace)
                refused = true
            }
            index += 1
        }
        #expect(refused)
        #expect(maxQueued > 0 && maxQueued <= writer.maximumQueuedWriteBytes)
        #expect(writer.writeQueueBytes == maxQueued)
        // Compare each chunk in place (memcmp): megabytes of byte-wise appends are slow in debug.
        var receivedCount = 0
        var mismatches = 0
        try #require(serverSide).startReading({ chunk in
            let end = receivedCount + chunk.count
            if end > sent.count {
                mismatches += 1
            } else {
                let same = sent.withUnsafeBytes { memcmp($0.baseAddress! + receivedCount, chunk.baseAddress!, chunk.count) == 0 }
                if !same { mismatches += 1 }
            }
            receivedCount = end
        }, onEnd: { _ in })
        #expect(drive(loop) { receivedCount >= sent.count })
        #expect(receivedCount == sent.count)
        #expect(mismatches == 0)
        #expect(writer.writeQueueBytes == 0)
        #expect(drained >= 1)
    }

    @Test func connectRefusedIsATypedError() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // A port that was free a moment ago: bind, read it, close.
        let probe = try TCPListener(loop: loop, bindTo: .loopbackIPv4(port: 0))
        let port = try #require(probe.localAddress).port
        probe.close()
        loop.runNoWait()
        var outcome: Result<TCPConnection, UVError>?
        var closed = false
        let connection = try TCPConnection.connect(loop: loop, to: .loopbackIPv4(port: port)) { outcome = $0 }
        connection.onClose = { closed = true }
        #expect(drive(loop) { outcome != nil && closed })
        guard case .failure(let error) = outcome else {
            Issue.record("connected to a closed port")
            return
        }
        #expect(error.code == UVError.connectionRefused)
        #expect(error.name == "ECONNREFUSED")
        #expect(error.message == "connection refused")
        #expect(error.operation == "tcp_connect 127.0.0.1:\(port)")
        #expect(loop.openHandleCount == 0)
    }

    @Test func closingAConnectingHandleCancels() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let listener = try TCPListener(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try listener.listen { $0.close() }
        var outcome: Result<TCPConnection, UVError>?
        let connection = try TCPConnection.connect(loop: loop, to: try #require(listener.localAddress)) { outcome = $0 }
        connection.close()
        #expect(drive(loop) { outcome != nil })
        if case .failure(let error) = outcome {
            #expect(error.code == UVError.cancelled)
        } else {
            Issue.record("expected a cancelled connect, got \(String(describing: outcome))")
        }
    }

    /// A server that closes each connection from inside its first read; the client sees the end.
    @Test func closingInsideReadCallback() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let listener = try TCPListener(loop: loop, bindTo: .loopbackIPv4(port: 0))
        var serverReads = 0
        var serverClosed = false
        try listener.listen { connection in
            connection.onClose = { serverClosed = true }
            try? connection.startReading({ _ in
                serverReads += 1
                connection.close()
                connection.close()
            }, onEnd: { _ in })
        }
        var clientEnd: UVError?? = .none
        try TCPConnection.connect(loop: loop, to: try #require(listener.localAddress)) { result in
            guard let connection = try? result.get() else { return }
            try? connection.startReading({ _ in }, onEnd: { clientEnd = .some($0) })
            _ = try? connection.write(payload(0, length: 100))
        }
        #expect(drive(loop) { serverClosed && clientEnd != nil })
        #expect(serverReads == 1)
    }

    @Test func listeningOnABusyPortIsATypedError() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let first = try TCPListener(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try first.listen { $0.close() }
        let busy = try #require(first.localAddress)
        do throws(UVError) {
            let second = try TCPListener(loop: loop, bindTo: busy)
            try second.listen { $0.close() }
            Issue.record("listened on a busy port")
        } catch {
            #expect(error.code == UVError.addressInUse)
        }
    }
}
