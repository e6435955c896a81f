import Glibc
import InkDaemon
import InkUV
import Testing

/// A client on the loop that records what it receives.
private final class Recorder {
    let client: MQTTClient
    var messages: [MQTTClient.Message] = []
    var connects = 0
    var disconnects = 0

    init(loop: EventLoop, port: UInt16, id: String) throws {
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: Int32(port), clientID: id)
        configuration.reconnectMinimumMicroseconds = 20_000
        configuration.reconnectMaximumMicroseconds = 200_000
        client = try MQTTClient(loop: loop, configuration: configuration)
        client.onConnect = { [unowned self] in connects += 1 }
        client.onDisconnect = { [unowned self] _ in disconnects += 1 }
        client.onMessage = { [unowned self] in messages.append($0) }
    }
}

private func payloads(_ range: ClosedRange<Int>, tag: String) -> [[UInt8]] {
    range.map { index in Array("\(tag)-\(index)".utf8) + [0, 0xFF, UInt8(index & 0xFF)] }
}

@Suite(.serialized) struct MQTTClientTests {
    @Test func backoffDoublesUpToTheCapAndResets() {
        var backoff = MQTTBackoff(minimumMicroseconds: 100, maximumMicroseconds: 1000)
        #expect((0..<6).map { _ in backoff.nextDelay() } == [100, 200, 400, 800, 1000, 1000])
        backoff.reset()
        #expect(backoff.nextDelay() == 100)
        var huge = MQTTBackoff(minimumMicroseconds: UInt64.max / 2, maximumMicroseconds: UInt64.max)
        #expect((0..<100).map { _ in huge.nextDelay() }.last == UInt64.max)
    }

    @Test func errorsCarryMosquittoText() {
        let error = MQTTError(code: MQTTError.notConnected, operation: "publish t")
        #expect(error.message == "The client is not currently connected.")
        #expect(error.description.hasPrefix("publish t: The client is not currently connected."))
    }

    @Test func publishBeforeConnectIsATypedError() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = try MQTTClient(loop: loop, configuration: .init(host: "127.0.0.1", port: 1))
        #expect(throws: MQTTError(code: MQTTError.notConnected, operation: "publish t")) {
            try client.publish(topic: "t", payload: [1])
        }
        client.close()
        #expect(client.state == .closed)
    }

    @Test func subscribePublishInOrderThenSurviveBrokerRestart() throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        defer { broker.stop() }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let watcher = try Recorder(loop: loop, port: broker.port, id: "inkwire-test-watcher")
        let sender = try Recorder(loop: loop, port: broker.port, id: "inkwire-test-sender")
        defer {
            watcher.client.close()
            sender.client.close()
        }
        let topic = "inkwire/room/7/batches"
        try watcher.client.subscribe(topic: topic)
        watcher.client.start()
        sender.client.start()
        // A QoS 1 subscription is in place once a probe published after SUBACK comes back;
        // publish probes until one arrives, then the real sequence.
        #expect(drive(loop) { watcher.client.state == .connected && sender.client.state == .connected })
        try sendAfterProbe(loop, sender: sender, watcher: watcher, topic: topic, tag: "first")

        broker.stop()
        #expect(drive(loop) { watcher.disconnects == 1 && sender.disconnects == 1 })
        try broker.start()
        #expect(drive(loop) { watcher.connects == 2 && sender.connects == 2 }, "broker log:\n\(broker.log)")
        try sendAfterProbe(loop, sender: sender, watcher: watcher, topic: topic, tag: "second")
        #expect(watcher.client.connectCount == 2)
    }

    /// Nagle on the broker socket held a home's record publishes behind its own PUBACKs until
    /// the broker's delayed ACK (about 20 ms of the bridge hop with 10 rooms): it must be off,
    /// and stay off after a reconnect (a new socket).
    @Test func brokerSocketHasNagleOff() throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        defer { broker.stop() }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = try Recorder(loop: loop, port: broker.port, id: "inkwire-test-nodelay")
        var plain = MQTTClient.Configuration(host: "127.0.0.1", port: Int32(broker.port), clientID: "inkwire-test-nagle")
        plain.noDelay = false
        let nagle = try MQTTClient(loop: loop, configuration: plain)
        defer {
            client.client.close()
            nagle.close()
        }
        #expect(client.client.configuration.noDelay)
        client.client.start()
        nagle.start()
        #expect(drive(loop) { client.client.state == .connected && nagle.state == .connected })
        #expect(tcpNoDelay(client.client.socketDescriptor) == 1)
        #expect(tcpNoDelay(nagle.socketDescriptor) == 0)
        broker.stop()
        #expect(drive(loop) { client.disconnects == 1 })
        try broker.start()
        #expect(drive(loop) { client.connects == 2 }, "broker log:\n\(broker.log)")
        #expect(tcpNoDelay(client.client.socketDescriptor) == 1)
    }

    private func tcpNoDelay(_ fd: Int32) -> Int32? {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard fd >= 0, getsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length) == 0 else { return nil }
        return value
    }

    @Test func retriesUntilTheBrokerAppears() throws {
        guard MQTTBroker.isInstalled else { return }
        let port = MQTTBroker.freePort()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = try Recorder(loop: loop, port: port, id: "inkwire-test-early")
        defer { client.client.close() }
        client.client.start()
        // Nobody listens yet: refused attempts, retried with backoff, no connect reported.
        drive(loop, limitMicroseconds: 300_000) { false }
        #expect(client.connects == 0)
        #expect(client.client.state != .connected)
        #expect(client.client.lastError != nil)
        let broker = try MQTTBroker(port: port)
        defer { broker.stop() }
        #expect(drive(loop) { client.connects == 1 }, "last error: \(String(describing: client.client.lastError))")
        #expect(client.client.lastError == nil)
    }

    /// Publishes probes until the watcher gets one (its subscription is live), then 50 exact
    /// payloads; the watcher must receive exactly those, in order.
    private func sendAfterProbe(_ loop: EventLoop, sender: Recorder, watcher: Recorder, topic: String, tag: String) throws {
        var probes = 0
        let live = drive(loop) {
            if watcher.messages.contains(where: { $0.payload == Array("probe-\(tag)".utf8) }) { return true }
            if probes < 50 && (try? sender.client.publish(topic: topic, payload: Array("probe-\(tag)".utf8))) != nil { probes += 1 }
            return false
        }
        #expect(live)
        watcher.messages.removeAll()
        let expected = payloads(1...50, tag: tag)
        for payload in expected { try sender.client.publish(topic: topic, payload: payload) }
        #expect(drive(loop) { watcher.messages.count >= expected.count })
        // Let stragglers (late probe copies) show up, then compare exactly.
        drive(loop, limitMicroseconds: 100_000) { false }
        let received = watcher.messages.filter { $0.payload != Array("probe-\(tag)".utf8) }
        #expect(received.map(\.payload) == expected)
        #expect(received.allSatisfy { $0.topic == topic })
    }
}
