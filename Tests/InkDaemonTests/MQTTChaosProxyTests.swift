import InkBenchSupport
import InkDaemon
import InkUV
import MQTTChaos
import Testing

/// What the seeded model decides for the first `count` publishes of one stream.
private func modelCounts(_ configuration: MQTTChaosConfiguration, seed: UInt64, client: String,
                         direction: MQTTChaosModel.Direction, count: Int) -> (delayed: Int, duplicated: Int) {
    var model = MQTTChaosModel(configuration: configuration, seed: MQTTChaosModel.streamSeed(
        runSeed: seed, clientIdentifier: Array(client.utf8), connectionOrdinal: 0, direction: direction))
    var delayed = 0, duplicated = 0
    for _ in 0..<count {
        let decision = model.next()
        if decision.delayMicroseconds > 0 { delayed += 1 }
        if decision.duplicateDelayMicroseconds != nil { duplicated += 1 }
    }
    return (delayed, duplicated)
}

/// Numbered payloads: 4 bytes big-endian.
private func number(_ payload: [UInt8]) -> Int { payload.prefix(4).reduce(0) { $0 << 8 | Int($1) } }
private func payload(_ index: Int) -> [UInt8] { [UInt8(index >> 24 & 0xFF), UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF)] }

/// Pairs of (later-numbered arrived first) in a received sequence: how much was reordered.
private func inversions(_ numbers: [Int]) -> Int {
    var highest = -1, count = 0
    for value in numbers {
        if value < highest { count += 1 }
        highest = max(highest, value)
    }
    return count
}

@Suite(.serialized) struct MQTTChaosProxyTests {
    static let chaos = MQTTChaosConfiguration(delayMicroseconds: 1000, jitterMicroseconds: 15_000, duplicateChance: 0.05,
                                              burstChance: 0.02, maximumBurstLength: 6)
    static let count = 1000

    /// A sender and a watcher, both through the proxy to a real mosquitto, 1000 numbered QoS 1
    /// publishes: every number arrives, reordered and duplicated, and each direction's counts
    /// are exactly what the seed's model decided (QoS 1 copies are publications of their own to
    /// the broker, so the watcher's stream is the sender's originals plus its copies).
    @Test(arguments: [UInt64(1), 2])
    func qos1ThroughChaosArrivesCompletelyWithTheSeededCounts(seed: UInt64) throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        defer { broker.stop() }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let proxy = try MQTTChaosProxy(loop: loop, listen: .loopbackIPv4(port: 0), forward: .loopbackIPv4(port: broker.port),
                                       configuration: Self.chaos, seed: seed)
        defer { proxy.close() }
        let port = try #require(proxy.listenAddress?.port)
        var watcherConfiguration = MQTTClient.Configuration(host: "127.0.0.1", port: Int32(port), clientID: "chaos-watcher")
        watcherConfiguration.reconnectMinimumMicroseconds = 20_000
        let watcher = try MQTTClient(loop: loop, configuration: watcherConfiguration)
        let sender = try MQTTClient(loop: loop, configuration: .init(host: "127.0.0.1", port: Int32(port), clientID: "chaos-sender"))
        defer {
            watcher.close()
            sender.close()
        }
        var received: [Int] = []
        watcher.onMessage = { received.append(number($0.payload)) }
        let topic = "inkwire/room/chaos/batches"
        try watcher.subscribe(topic: topic)
        watcher.start()
        // CONNACK and SUBACK have passed the proxy (it forwards them at once): subscribed.
        #expect(drive(loop) { proxy.counters(from: .broker).packets == 2 }, "seed \(seed)")
        sender.start()
        #expect(drive(loop) { sender.state == .connected }, "seed \(seed)")

        // One publish per millisecond keeps the broker's per-client queue far below its limit.
        var next = 0
        let pacer = try LoopTimer(loop: loop)
        defer { pacer.close() }
        pacer.start(afterMicroseconds: 1000, repeatingEveryMicroseconds: 1000) {
            for _ in 0..<2 where next < Self.count {
                if (try? sender.publish(topic: topic, payload: payload(next))) != nil { next += 1 }
            }
        }
        let toBroker = modelCounts(Self.chaos, seed: seed, client: "chaos-sender", direction: .clientToBroker, count: Self.count)
        let watcherStream = Self.count + toBroker.duplicated
        let toWatcher = modelCounts(Self.chaos, seed: seed, client: "chaos-watcher", direction: .brokerToClient, count: watcherStream)
        let expectedDeliveries = watcherStream + toWatcher.duplicated
        #expect(toBroker.duplicated > 0 && toWatcher.duplicated > 0, "seed \(seed)")
        #expect(drive(loop, limitMicroseconds: 20_000_000) { received.count >= expectedDeliveries }, "seed \(seed): \(received.count)")
        // Nothing more trickles in, and the senders' sessions end with nothing unacknowledged.
        drive(loop, limitMicroseconds: 300_000) { false }

        #expect(received.count == expectedDeliveries, "seed \(seed)")
        #expect(Set(received) == Set(0..<Self.count), "seed \(seed)")
        #expect(inversions(received) > 0, "seed \(seed)")
        let up = proxy.counters(from: .client), down = proxy.counters(from: .broker)
        #expect(up.publishes == Self.count && up.delayed == toBroker.delayed && up.duplicated == toBroker.duplicated, "seed \(seed)")
        #expect(down.publishes == watcherStream && down.delayed == toWatcher.delayed && down.duplicated == toWatcher.duplicated, "seed \(seed)")
        #expect(up.duplicatesSkipped == 0 && down.duplicatesSkipped == 0 && up.heldFull == 0 && down.heldFull == 0, "seed \(seed)")
        // Each copy was acknowledged twice by its receiver; the surplus PUBACKs stayed in the proxy.
        #expect(down.surplusAcksDropped == toBroker.duplicated && up.surplusAcksDropped == toWatcher.duplicated, "seed \(seed)")
        #expect(down.overtaken > 0 && down.maximumOvertakenDepth > 0, "seed \(seed)")
        #expect(sender.state == .connected && watcher.state == .connected && sender.connectCount == 1 && watcher.connectCount == 1,
                "seed \(seed): broker log\n\(broker.log)")
    }

    /// A raw QoS 0 sender writes 300 publishes and DISCONNECT in one go: the proxy delays and
    /// copies the publishes (plain copies, QoS 0 has no DUP) and holds DISCONNECT behind them, so
    /// the watcher gets every publication, the copies included, and the counts match the model.
    @Test func qos0BurstThenDisconnectLosesNothing() throws {
        guard MQTTBroker.isInstalled else { return }
        let seed: UInt64 = 3
        let count = 300
        let broker = try MQTTBroker()
        defer { broker.stop() }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let proxy = try MQTTChaosProxy(loop: loop, listen: .loopbackIPv4(port: 0), forward: .loopbackIPv4(port: broker.port),
                                       configuration: Self.chaos, seed: seed)
        defer { proxy.close() }
        let address = try #require(proxy.listenAddress)
        let watcher = try MQTTClient(loop: loop, configuration: .init(host: "127.0.0.1", port: Int32(address.port), clientID: "qos0-watcher"))
        defer { watcher.close() }
        var received: [Int] = []
        watcher.onMessage = { received.append(number($0.payload)) }
        let topic = "inkwire/room/qos0/batches"
        try watcher.subscribe(topic: topic)
        watcher.start()
        #expect(drive(loop) { proxy.counters(from: .broker).packets == 2 })

        var connack = false, ended = false
        var raw: TCPConnection?
        try TCPConnection.connect(loop: loop, to: address) { result in
            guard case .success(let connection) = result else { return }
            raw = connection
            try? connection.startReading({ bytes in if bytes.first == 0x20 { connack = true } }, onEnd: { _ in ended = true })
            _ = try? connection.write(try! MQTTPacketBuilder.connect(clientIdentifier: "qos0-sender"))
        }
        #expect(drive(loop) { connack })
        var stream: [UInt8] = []
        for index in 0..<count { stream += try MQTTPacketBuilder.publish(topic: topic, payload: payload(index), qos: 0) }
        stream += MQTTPacketBuilder.disconnect
        try raw?.write(stream)

        let toBroker = modelCounts(Self.chaos, seed: seed, client: "qos0-sender", direction: .clientToBroker, count: count)
        let watcherStream = count + toBroker.duplicated
        let toWatcher = modelCounts(Self.chaos, seed: seed, client: "qos0-watcher", direction: .brokerToClient, count: watcherStream)
        // The broker closes the sender after DISCONNECT, which came through last.
        #expect(drive(loop) { ended && received.count >= watcherStream + toWatcher.duplicated }, "seed \(seed): \(received.count)")
        drive(loop, limitMicroseconds: 200_000) { false }
        raw?.close()
        #expect(received.count == watcherStream + toWatcher.duplicated, "seed \(seed)")
        #expect(Set(received) == Set(0..<count), "seed \(seed)")
        #expect(inversions(received) > 0, "seed \(seed)")
        let up = proxy.counters(from: .client), down = proxy.counters(from: .broker)
        #expect(up.publishes == count && up.duplicated == toBroker.duplicated && up.duplicated > 0, "seed \(seed)")
        #expect(down.publishes == watcherStream && down.duplicated == toWatcher.duplicated, "seed \(seed)")
        #expect(up.surplusAcksDropped == 0 && down.surplusAcksDropped == 0, "seed \(seed)")
    }
}
