import Testing
@testable import InkUV

@Suite(.serialized) struct UDPSocketTests {
    @Test(arguments: ["127.0.0.1:0", "[::1]:0"])
    func echo(bindText: String) throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let bind = try SocketAddress.parse(bindText)
        let server = try UDPSocket(loop: loop, bindTo: bind)
        let serverAddress = try server.localAddress
        #expect(serverAddress.port != 0)
        #expect(serverAddress.family == bind.family)
        try server.startReceiving { bytes, sender in
            _ = try? server.send(bytes, to: sender)
        }
        let client = try UDPSocket(loop: loop, bindTo: bind)
        let clientAddress = try client.localAddress
        var replies: [[UInt8]] = []
        var senders: [SocketAddress] = []
        try client.startReceiving { bytes, sender in
            replies.append(Array(bytes))
            senders.append(sender)
        }
        let messages: [[UInt8]] = [Array("hello".utf8), [], payload(3, length: 1400)]
        for message in messages { try client.send(message, to: serverAddress) }
        #expect(drive(loop) { replies.count == messages.count })
        #expect(replies == messages)
        #expect(senders == Array(repeating: serverAddress, count: messages.count))
        #expect(server.datagramsReceived == 3 && server.datagramsSent == 3)
        #expect(clientAddress.isLoopback)
    }

    /// Many datagrams of varied sizes (including empty) arrive exactly and in order through the
    /// recvmmsg path, in rounds small enough for the default kernel receive buffer.
    @Test(arguments: [UDPSocket.maximumReceiveBatch, 1])
    func manyDatagramsInOrder(batch: Int) throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let server = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0), batch: batch)
        #expect(server.usesRecvmmsg)
        try server.setReceiveBufferSize(1 << 20)
        #expect(try server.receiveBufferSize() > 0)
        try server.setSendBufferSize(1 << 20)
        #expect(try server.sendBufferSize() > 0)
        var received: [[UInt8]] = []
        let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        let clientAddress = try client.localAddress
        try server.startReceiving { bytes, sender in
            #expect(sender == clientAddress)
            received.append(Array(bytes))
        }
        let target = try server.localAddress
        var sent: [[UInt8]] = []
        let rounds = 40, perRound = 25
        for round in 0..<rounds {
            for i in 0..<perRound {
                let index = round * perRound + i
                let message = payload(index, length: (index * 37) % 1200)
                sent.append(message)
                try client.send(message, to: target)
            }
            #expect(drive(loop) { received.count == sent.count }, "round \(round)")
        }
        #expect(received == sent)
        #expect(server.datagramsTruncated == 0)
        #expect(server.datagramsReceived == UInt64(rounds * perRound))
    }

    @Test func closingInsideReceiveStopsDelivery() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let server = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        var delivered = 0
        var closed = false
        server.onClose = { closed = true }
        try server.startReceiving { _, _ in
            delivered += 1
            server.close()
            server.close()
        }
        let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        for i in 0..<10 { try client.send(payload(i, length: 10), to: try server.localAddress) }
        #expect(drive(loop) { closed })
        #expect(delivered == 1)
        #expect(throws: UVError.self) { try server.send([1], to: .loopbackIPv4(port: 9)) }
        client.close()
        loop.runNoWait()
        #expect(loop.openHandleCount == 0)
    }

    @Test func oversizedDatagramIsRefused() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let socket = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        do {
            try socket.send([UInt8](repeating: 0, count: UDPSocket.maximumDatagramBytes + 1), to: try socket.localAddress)
            Issue.record("sent an oversized datagram")
        } catch {
            #expect(error.name == "EMSGSIZE")
        }
    }

    @Test func bindingABusyPortIsATypedError() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let first = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        do {
            _ = try UDPSocket(loop: loop, bindTo: try first.localAddress)
            Issue.record("bound a busy port")
        } catch {
            #expect(error.code == UVError.addressInUse)
            #expect(error.name == "EADDRINUSE")
            #expect(error.operation.hasPrefix("udp_bind 127.0.0.1:"))
        }
        loop.runNoWait()
        #expect(loop.openHandleCount == 1)
    }
}

@Suite(.serialized) struct UDPQueuedSendTests {
    /// The queued path owns a copy of each datagram until its callback, keeps order, and
    /// respects its byte bound.
    @Test func queuedSendsOwnTheirBytesAndKeepOrder() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let server = try UDPSocket(loop: loop, bindTo: .loopbackIPv6(port: 0))
        var received: [[UInt8]] = []
        try server.startReceiving { bytes, _ in received.append(Array(bytes)) }
        let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv6(port: 0))
        client.queueEverySendForTesting = true
        client.maximumQueuedSendBytes = 10 * 100
        var scratch = [UInt8](repeating: 0, count: 100)
        var expected: [[UInt8]] = []
        for i in 0..<10 {
            for j in scratch.indices { scratch[j] = UInt8(truncatingIfNeeded: i * 3 + j) }
            #expect(try client.send(scratch, to: try server.localAddress) == false)
            expected.append(scratch)
        }
        #expect(client.sendQueueCount == 10)
        #expect(client.sendQueueBytes == 1000)
        #expect(client.sendsQueued == 10)
        do {
            try client.send(scratch, to: try server.localAddress)
            Issue.record("queue bound not enforced")
        } catch {
            #expect(error.code == UVError.noBufferSpace)
        }
        #expect(drive(loop) { received.count == 10 })
        #expect(received == expected)
        #expect(client.sendQueueCount == 0)
    }

    /// Closing with sends still queued cancels them and frees every buffer (no error reported).
    @Test func closingCancelsQueuedSends() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        client.queueEverySendForTesting = true
        var errors: [UVError] = []
        client.onError = { errors.append($0) }
        for i in 0..<5 { try client.send(payload(i, length: 50), to: .loopbackIPv4(port: 9)) }
        var closed = false
        client.onClose = { closed = true }
        client.close()
        #expect(drive(loop) { closed })
        #expect(errors.isEmpty)
    }
}

@Suite(.serialized) struct UDPDualStackTests {
    /// An IPv6 socket serving IPv4 peers: the sender arrives IPv4-mapped, and replying to the
    /// plain IPv4 address works because send maps it. Bound to the mapped loopback only.
    @Test func ipv6SocketServesIPv4Peers() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let server = try UDPSocket(loop: loop, bindTo: try SocketAddress.parse("[::ffff:127.0.0.1]:0"))
        let port = try server.localAddress.port
        var senders: [SocketAddress] = []
        try server.startReceiving { bytes, sender in
            senders.append(sender)
            _ = try? server.send(bytes, to: sender.unmappedIPv4)
        }
        let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        var replies: [[UInt8]] = []
        try client.startReceiving { bytes, _ in replies.append(Array(bytes)) }
        try client.send([7, 8, 9], to: .loopbackIPv4(port: port))
        #expect(drive(loop) { replies.count == 1 })
        #expect(replies == [[7, 8, 9]])
        let clientAddress = try client.localAddress
        #expect(senders == [clientAddress.ipv4Mapped])
        #expect(senders.first?.unmappedIPv4 == clientAddress)
        #expect(senders.first?.description == "[::ffff:127.0.0.1]:\(clientAddress.port)")
    }
}

@Suite(.serialized) struct UDPConnectedTests {
    @Test(arguments: ["127.0.0.1:0", "[::1]:0"])
    func connectedClientSendsWithoutAddress(bindText: String) throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let bind = try SocketAddress.parse(bindText)
        let server = try UDPSocket(loop: loop, bindTo: bind)
        try server.startReceiving { bytes, sender in _ = try? server.send(bytes, to: sender) }
        let client = try UDPSocket(loop: loop, bindTo: bind)
        #expect(client.remoteAddress == nil)
        try client.connect(to: try server.localAddress)
        #expect(client.remoteAddress == (try server.localAddress))
        var replies: [[UInt8]] = []
        try client.startReceiving { bytes, sender in
            #expect(sender == client.remoteAddress)
            replies.append(Array(bytes))
        }
        try client.send([1, 2, 3])
        try client.send([])
        #expect(drive(loop) { replies.count == 2 })
        #expect(replies == [[1, 2, 3], []])
    }

    /// A connected client learns that nobody listens (ICMP port unreachable on loopback).
    @Test func unreachablePeerIsConnectionRefused() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let probe = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        let closedPort = try probe.localAddress.port
        probe.close()
        loop.runNoWait()
        let client = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try client.connect(to: .loopbackIPv4(port: closedPort))
        var errors: [UVError] = []
        client.onError = { errors.append($0) }
        try client.startReceiving { _, _ in }
        // The refusal comes back either on a receive or on the next send.
        let retry = try LoopTimer(loop: loop)
        retry.start(afterMicroseconds: 0, repeatingEveryMicroseconds: 10_000) {
            do throws(UVError) { try client.send([0]) } catch { errors.append(error) }
        }
        #expect(drive(loop) { !errors.isEmpty })
        #expect(errors.first?.code == UVError.connectionRefused)
        #expect(errors.first?.name == "ECONNREFUSED")
    }
}
