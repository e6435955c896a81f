import Glibc
import Testing
@testable import InkUV

/// `startBatchingSends()`: datagrams sent during a loop iteration leave together with
/// sendmmsg(2) when the iteration's IO callbacks are done (or before the loop next waits), and
/// arrive exactly and in order, including behind a send buffer the kernel reports full.
@Suite(.serialized) struct UDPBatchedSendTests {
    /// What one batching socket reported through its callbacks.
    final class Reports {
        var flushedDatagrams = 0
        var flushedBytes = 0
        var flushes = 0
        var errors: [UVError] = []

        func watch(_ socket: UDPSocket) {
            socket.onSendsFlushed = { datagrams, bytes in
                self.flushes += 1
                self.flushedDatagrams += datagrams
                self.flushedBytes += bytes
            }
            socket.onSendError = { self.errors.append($0) }
        }
    }

    /// A receiver that keeps every datagram it gets, and a batching sender watched by `reports`,
    /// both on one loop and one address family.
    final class Pair {
        let loop: EventLoop
        let receiver: UDPSocket
        let sender: UDPSocket
        let reports = Reports()
        var received: [[UInt8]] = []

        init(ipv6: Bool = false) throws {
            loop = try EventLoop()
            let any: SocketAddress = ipv6 ? .loopbackIPv6(port: 0) : .loopbackIPv4(port: 0)
            receiver = try UDPSocket(loop: loop, bindTo: any)
            sender = try UDPSocket(loop: loop, bindTo: any)
            try receiver.setReceiveBufferSize(1 << 20)
            try receiver.startReceiving { [unowned self] bytes, _ in self.received.append(Array(bytes)) }
            try sender.startBatchingSends()
            reports.watch(sender)
        }
    }

    /// A burst sent from a receive callback (flushed after the IO callbacks) and one sent from
    /// a timer callback (flushed before the loop waits), each larger than one batch, both
    /// arrive byte for byte in order; the counters and the flush reports agree exactly.
    @Test func burstsFromCallbacksArriveInOrder() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let receiver = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try receiver.setReceiveBufferSize(1 << 20)
        var received: [[UInt8]] = []
        try receiver.startReceiving { bytes, _ in received.append(Array(bytes)) }
        let target = try receiver.localAddress

        let sender = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try sender.startBatchingSends()
        try sender.startBatchingSends()
        #expect(sender.isBatchingSends)
        let reports = Reports()
        reports.watch(sender)
        let burst = UDPSocket.sendBatchDatagrams * 2 + 5
        var expected: [[UInt8]] = []
        var heldAfterSending: [Int] = []
        func sendBurst(_ first: Int) {
            for index in first..<(first + burst) {
                let message = payload(index, length: (index * 37) % 1000)
                expected.append(message)
                _ = try? sender.send(message, to: target)
            }
            heldAfterSending.append(sender.batchedSendCount)
        }

        // Burst one: from the receive callback of a trigger datagram.
        let trigger = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try sender.startReceiving { _, _ in sendBurst(0) }
        try trigger.send([1], to: try sender.localAddress)
        #expect(drive(loop) { received.count == burst })

        // Burst two: from a timer callback.
        let timer = try LoopTimer(loop: loop)
        timer.start(afterMicroseconds: 1000) { sendBurst(burst) }
        #expect(drive(loop) { received.count == 2 * burst })
        timer.close()

        #expect(received == expected)
        // Each burst filled two whole batches (flushed at once) and left 5 for the hook.
        #expect(heldAfterSending == [5, 5])
        #expect(sender.batchedSendCount == 0)
        let bytes = expected.reduce(0) { $0 + $1.count }
        #expect(reports.flushedDatagrams == 2 * burst)
        #expect(reports.flushedBytes == bytes)
        #expect(reports.flushes == 6)
        #expect(reports.errors.isEmpty)
        #expect(sender.datagramsSent == UInt64(2 * burst))
        #expect(sender.bytesSent == UInt64(bytes))
        #expect(sender.sendBatches >= 6)
    }

    /// Datagrams whose bytes overflow the batch flush it first; large ones arrive whole.
    @Test func batchFlushesWhenItsBytesAreFull() throws {
        let pair = try Pair(ipv6: true)
        defer { pair.loop.shutdown() }
        let (loop, receiver, sender, reports) = (pair.loop, pair.receiver, pair.sender, pair.reports)
        let length = UDPSocket.sendBatchBytes / 3
        let messages = (0..<4).map { payload($0, length: length) }
        var held: [Int] = []
        for message in messages {
            try sender.send(message, to: try receiver.localAddress)
            held.append(sender.batchedSendCount)
        }
        #expect(held == [1, 2, 3, 1])
        #expect(reports.flushes == 1 && reports.flushedDatagrams == 3)
        #expect(drive(loop) { pair.received.count == messages.count })
        #expect(pair.received == messages)
        #expect(reports.flushedDatagrams == 4 && reports.flushedBytes == 4 * length)
    }

    /// A send buffer the kernel reports full (EAGAIN): what sendmmsg did not take goes on
    /// through libuv's queue, and a later batch queues behind it, so every datagram arrives,
    /// in order. An AF_UNIX datagram pair pushes back instead of dropping, unlike loopback UDP.
    @Test func fullSendBufferFallsBackToTheQueueInOrder() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var pair: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &pair) == 0)
        defer { Glibc.close(pair[1]) }
        var small: Int32 = 4096
        try #require(setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size)) == 0)
        let sender = try UDPSocket(loop: loop, adopting: pair[0])
        try sender.startBatchingSends()
        let reports = Reports()
        reports.watch(sender)

        var received: [[UInt8]] = []
        let reader = try Poll(loop: loop, fd: pair[1])
        var buffer = [UInt8](repeating: 0, count: 2048)
        try reader.start(.readable) { _, _ in
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(pair[1], $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                guard count >= 0 else { break }
                received.append(Array(buffer[0..<count]))
            }
        }
        defer { reader.close() }

        var expected: [[UInt8]] = []
        for round in 0..<2 {
            for i in 0..<40 {
                let message = payload(round * 40 + i, length: 1000)
                expected.append(message)
                try sender.send(message)
            }
            sender.flushSends()
            // The first round filled the buffer; the second found datagrams still queued.
            #expect(sender.sendQueueCount > 0, "round \(round)")
        }
        #expect(sender.sendsQueued > 40 && sender.sendsQueued < 80)
        #expect(drive(loop) { received.count == expected.count })
        #expect(received == expected)
        #expect(sender.sendQueueCount == 0)
        #expect(reports.errors.isEmpty)
        #expect(reports.flushedDatagrams == 80 && reports.flushedBytes == 80_000)
        #expect(sender.datagramsSent == 80 && sender.bytesSent == 80_000)
    }

    /// A datagram the kernel refuses for itself is reported once and skipped; the ones before
    /// and after it still leave, in order, and only they are counted.
    @Test func refusedDatagramIsReportedAndTheRestLeave() throws {
        let pair = try Pair()
        defer { pair.loop.shutdown() }
        let (loop, receiver, sender, reports) = (pair.loop, pair.receiver, pair.sender, pair.reports)
        // An IPv4 socket cannot reach an IPv6 address: EAFNOSUPPORT for that datagram only.
        try sender.send([1, 1], to: try receiver.localAddress)
        try sender.send([2, 2, 2], to: .loopbackIPv6(port: 9))
        try sender.send([3], to: try receiver.localAddress)
        sender.flushSends()
        #expect(reports.errors.map(\.name) == ["EAFNOSUPPORT"])
        #expect(reports.errors.first?.operation == "udp_send [::1]:9")
        #expect(reports.flushedDatagrams == 2 && reports.flushedBytes == 3)
        #expect(drive(loop) { pair.received.count == 2 })
        #expect(pair.received == [[1, 1], [3]])
        #expect(sender.datagramsSent == 2)
    }

    /// Behind the queued path's byte bound, the rest of a batch is refused one by one (ENOBUFS,
    /// reported), and what fit arrives in order.
    @Test func queueBoundRefusesTheRestOfABatch() throws {
        let pair = try Pair()
        defer { pair.loop.shutdown() }
        let (loop, receiver, sender, reports) = (pair.loop, pair.receiver, pair.sender, pair.reports)
        sender.queueEverySendForTesting = true
        sender.maximumQueuedSendBytes = 500
        let messages = (0..<8).map { payload($0, length: 100) }
        for message in messages { try sender.send(message, to: try receiver.localAddress) }
        sender.flushSends()
        #expect(sender.sendQueueCount == 5)
        #expect(reports.errors.map(\.code) == Array(repeating: UVError.noBufferSpace, count: 3))
        #expect(reports.flushedDatagrams == 5 && reports.flushedBytes == 500)
        #expect(drive(loop) { pair.received.count == 5 })
        #expect(pair.received == Array(messages.prefix(5)))
    }

    /// Closing sends what is batched first (as unbatched sends would have left already); the
    /// hooks keep no loop alive and close with the socket.
    @Test func closeFlushesAndHooksKeepNothingAlive() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let receiver = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        var received: [[UInt8]] = []
        try receiver.startReceiving { bytes, _ in received.append(Array(bytes)) }
        let sender = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try sender.startBatchingSends()
        #expect(loop.openHandleCount == 4)
        receiver.stopReceiving()
        #expect(!loop.isAlive)
        try receiver.startReceiving { bytes, _ in received.append(Array(bytes)) }
        for i in 0..<3 { try sender.send(payload(i, length: 20), to: try receiver.localAddress) }
        #expect(sender.batchedSendCount == 3)
        sender.close()
        #expect(throws: UVError.self) { try sender.send([1], to: .loopbackIPv4(port: 9)) }
        #expect(drive(loop) { received.count == 3 })
        #expect(received == (0..<3).map { payload($0, length: 20) })
        #expect(loop.openHandleCount == 1)
    }
}
