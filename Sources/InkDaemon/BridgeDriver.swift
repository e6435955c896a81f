import InkCodec
import InkProtocol
import InkRelay
import InkStore
import InkUV

/// What the relay driver tells the bridge (nil when not bridged).
protocol RelayBridgeHook: AnyObject {
    func relayRoomCreated(_ room: String)
    func relayAppended(_ record: RelayRecord)
    func relayDurable(room: String, upTo roomSeq: UInt64)
    /// After the relay's outputs were acted on: take its forwards, act on the bridge's outputs.
    /// True when that fed the relay again (its outputs must be drained once more).
    func pumpAfterRelayDrain() -> Bool
}

/// Drives `BridgeCore` from the loop: the `MQTTClient` brings broker messages and connection
/// changes, the relay driver its forwards, appends and durable marks; the bridge's outputs
/// become publishes, subscriptions and relay inputs. One timer sits at `pollTimeout()`.
final class BridgeDriver: RelayBridgeHook {
    let core: BridgeCore
    let client: MQTTClient
    let settings: BridgeSettings
    private let loop: EventLoop
    private unowned let driver: RelayDriver
    private let logger: Logger
    private let metrics: BridgeDaemonMetrics
    private let timer: LoopTimer
    private let reader: StoreLogReader
    private var closed = false
    private var lastConnectFailure = ""
    private var lastConnectFailureLoggedAt: UInt64 = 0
    /// The same connect error is logged again after this long, µs.
    static let connectFailureLogIntervalMicroseconds: UInt64 = 60_000_000

    init(loop: EventLoop, settings: BridgeSettings, daemonID: String, driver: RelayDriver, store: RoomLogStore,
         logger: Logger, registry: MetricsRegistry) throws(ConfigError) {
        self.loop = loop
        self.settings = settings
        self.driver = driver
        self.logger = logger
        reader = StoreLogReader(store: store)
        core = BridgeCore(configuration: BridgeConfiguration(daemonID: daemonID, incarnation: randomUInt64(), topicPrefix: settings.topicPrefix),
                          log: reader)
        metrics = BridgeDaemonMetrics(registry: registry)
        var mqtt = MQTTClient.Configuration(host: settings.host, port: settings.port, clientID: "inkwired-\(daemonID)-\(String(randomUInt64() & 0xffff, radix: 16))")
        mqtt.maximumPayloadBytes = BridgeWire.maxMessageBytes
        mqtt.username = settings.username
        mqtt.password = try settings.readPassword()
        if let tls = settings.tls {
            try tls.checkFiles()
            mqtt.tls = tls.client
        }
        do {
            client = try MQTTClient(loop: loop, configuration: mqtt)
            timer = try LoopTimer(loop: loop)
        } catch {
            throw ConfigError("--bridge: \(error)")
        }
    }

    var now: Instant { Instant(microseconds: loop.now) }

    /// Opens every restored room, then connects (retrying with backoff until `close`).
    func start() {
        for room in driver.relay.roomNames { core.openRoom(room, head: driver.relay.durableRoomSeq(room) ?? 0, now: now) }
        client.onConnect = { [weak self] in
            guard let self else { return }
            self.logger.notice("bridge connected", ["broker": "\(self.settings.host):\(self.settings.port)", "daemon_id": self.core.configuration.daemonID])
            self.core.handleConnected(now: self.now)
            self.driver.drain()
        }
        client.onConnectFailed = { [weak self] error in self?.connectFailed(error) }
        client.onDisconnect = { [weak self] error in
            guard let self else { return }
            self.logger.warning("bridge disconnected; reconnecting", ["error": error])
            self.core.handleDisconnected(now: self.now)
            self.driver.drain()
        }
        client.onMessage = { [weak self] message in
            guard let self else { return }
            self.core.handleMessage(topic: message.topic, payload: message.payload, now: self.now)
            self.driver.drain()
        }
        client.start()
        driver.drain()
    }

    /// Logs a failed attempt (retried with backoff) when its error differs from the last one
    /// logged or a minute has passed: a wrong CA or a refused password shows at once and
    /// stays visible, without a line per retry.
    private func connectFailed(_ error: MQTTError) {
        metrics.connectFailures.increment()
        // The same failure shows in libmosquitto's connect or its first read: one kind.
        let kind = "\(error.code) \(error.detail ?? "")"
        guard kind != lastConnectFailure || loop.now &- lastConnectFailureLoggedAt >= BridgeDriver.connectFailureLogIntervalMicroseconds else { return }
        lastConnectFailure = kind
        lastConnectFailureLoggedAt = loop.now
        let refusedCertificate = error.detail?.contains("certificate verify failed") == true
        logger.warning("bridge cannot connect; retrying", ["broker": "\(settings.host):\(settings.port)", "tls": settings.tls != nil, "error": error,
                                                          "hint": refusedCertificate ? "the broker's certificate does not chain to --bridge-ca-file or does not name \(settings.host)" : "-"])
    }

    func close() {
        guard !closed else { return }
        closed = true
        timer.close()
        client.close()
    }

    // MARK: RelayBridgeHook

    func relayRoomCreated(_ room: String) {
        core.openRoom(room, head: driver.relay.roomHead(room) ?? 0, now: now)
    }

    func relayAppended(_ record: RelayRecord) { core.handleAppended(record) }

    func relayDurable(room: String, upTo roomSeq: UInt64) { core.handleDurable(room: room, upTo: roomSeq, now: now) }

    func pumpAfterRelayDrain() -> Bool {
        let relay = driver.relay
        var fed = false
        while let forward = relay.pollForward() { core.handleForward(forward, now: now) }
        while let output = core.pollOutput() {
            switch output {
            case .subscribe(let topic):
                do { try client.subscribe(topic: topic) } catch { logger.error("bridge subscribe failed", ["topic": topic, "error": error]) }
            case .publish(let topic, let payload, let retain):
                do {
                    try client.publish(topic: topic, payload: payload, retain: retain)
                } catch {
                    // Lost with the connection: forwards are sent again, gaps requested again.
                    logger.debug("bridge publish failed", ["topic": topic, "error": error])
                }
            case .lead(let room):
                relay.setFollows(room, false)
                fed = true
            case .follow(let room):
                relay.setFollows(room, true)
            case .deliverOrdered(let record):
                do {
                    try relay.handleOrdered(record, now: now)
                    fed = true
                } catch {
                    metrics.refused.increment()
                    logger.error("bridge record refused by the relay", ["room": record.room, "room_seq": record.roomSeq, "error": "\(error)"])
                }
            case .deliverForwarded(let batch):
                relay.handleForwarded(batch, now: now)
                fed = true
            case .event(let event):
                note(event)
            }
        }
        armTimer()
        return fed
    }

    private func armTimer() {
        guard !closed else { return }
        if let deadline = core.pollTimeout() {
            timer.start(atMicroseconds: max(deadline.millisecondsRoundedUp * 1000, loop.now)) { [weak self] in
                guard let self else { return }
                self.core.handleTimeout(now: self.now)
                self.driver.drain()
            }
        } else {
            timer.stop()
        }
    }

    private func note(_ event: BridgeEvent) {
        switch event {
        case .homeDecided(let room, let home, let isSelf):
            logger.info("bridge home decided", ["room": room, "home": home, "self": isSelf])
        case .homeConflict(let room, let other):
            logger.warning("bridge home conflict: another daemon's claim wins", ["room": room, "other": other])
        case .malformed(let topic, let error):
            logger.warning("bridge message malformed", ["topic": topic, "error": "\(error)"])
        case .gapRequested(let room, let from, let through):
            logger.debug("bridge gap requested", ["room": room, "from": from, "through": through])
        case .forwardDropped(let room, let origin, let originSeq):
            logger.warning("bridge forward dropped", ["room": room, "origin": origin, "origin_seq": originSeq])
        }
    }

    /// Copies the core's counters into the Prometheus series (called before each scrape).
    func refreshMetrics() {
        metrics.update(core.metrics, connected: client.state == .connected,
                       led: core.roomNames.filter { core.home(of: $0) == core.configuration.daemonID }.count)
    }
}

/// Reads the home's durable log for gap repair and late daemons.
final class StoreLogReader: BridgeLogReader {
    let store: RoomLogStore
    init(store: RoomLogStore) { self.store = store }

    func records(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) -> [RelayRecord] {
        guard let page = try? store.readTail(room: room, after: after, maxRecords: maxRecords, maxBytes: maxBytes) else { return [] }
        return page.records.map { stored in
            let label = RelayRecord.parseAuthorLabel(stored.author)
            return RelayRecord(room: room, roomSeq: stored.roomSeq, author: label?.author ?? AuthorID(0), user: label?.user ?? stored.author,
                               origin: stored.origin, originSeq: stored.originSeq, timeMs: stored.receivedAtMs, payload: stored.payload)
        }
    }
}

/// The bridge's Prometheus series.
final class BridgeDaemonMetrics {
    let published: Counter
    let received: Counter
    let duplicates: Counter
    let gapsRequested: Counter
    let gapRepairs: Counter
    let retransmitted: Counter
    let malformed: Counter
    let refused: Counter
    let reorderDepthMax: Gauge
    let reorderHeld: Gauge
    let connected: Gauge
    let roomsLed: Gauge
    let connectFailures: Counter
    private var last = BridgeMetrics()

    init(registry: MetricsRegistry) {
        published = registry.counter("inkwire_bridge_published_total", help: "Messages published to the broker.")
        received = registry.counter("inkwire_bridge_received_total", help: "Bridge messages received from the broker.")
        duplicates = registry.counter("inkwire_bridge_duplicates_dropped_total", help: "Records and forwards dropped as already had.")
        gapsRequested = registry.counter("inkwire_bridge_gaps_requested_total", help: "Gap requests sent to a room's home.")
        gapRepairs = registry.counter("inkwire_bridge_gap_repairs_total", help: "Records applied from responses (gap repair, history sync).")
        retransmitted = registry.counter("inkwire_bridge_forwards_retransmitted_total", help: "Forwards sent again.")
        malformed = registry.counter("inkwire_bridge_malformed_total", help: "Malformed bridge messages dropped.")
        refused = registry.counter("inkwire_bridge_records_refused_total", help: "Home records the relay refused (should stay 0).")
        reorderDepthMax = registry.gauge("inkwire_bridge_reorder_depth_max", help: "Largest distance ahead of the next expected record or forward seen.")
        reorderHeld = registry.gauge("inkwire_bridge_reorder_held", help: "Records and forwards held behind a gap now.")
        connected = registry.gauge("inkwire_bridge_connected", help: "1 while connected to the broker.")
        roomsLed = registry.gauge("inkwire_bridge_rooms_led", help: "Rooms this daemon is the home of.")
        connectFailures = registry.counter("inkwire_bridge_connect_failures_total", help: "Broker connection attempts that failed (refused, unreachable, TLS).")
    }

    func update(_ m: BridgeMetrics, connected isConnected: Bool, led: Int) {
        func delta(_ now: Int, _ before: Int) -> UInt64 { UInt64(max(0, now - before)) }
        published.increment(by: delta(m.published, last.published))
        received.increment(by: delta(m.received, last.received))
        duplicates.increment(by: delta(m.duplicatesDropped, last.duplicatesDropped))
        gapsRequested.increment(by: delta(m.gapsRequested, last.gapsRequested))
        gapRepairs.increment(by: delta(m.gapRepairs, last.gapRepairs))
        retransmitted.increment(by: delta(m.forwardsRetransmitted, last.forwardsRetransmitted))
        malformed.increment(by: delta(m.malformed, last.malformed))
        reorderDepthMax.set(Double(m.reorderDepthMax))
        reorderHeld.set(m.reorderHeld)
        connected.set(isConnected ? 1 : 0)
        roomsLed.set(led)
        last = m
    }
}

extension Daemon {
    /// With `--bridge`: the daemon id (configured, or kept in the data dir) and the driver.
    func openBridge() throws(ConfigError) {
        guard let settings = config.bridge else { return }
        let id = try settings.resolveDaemonID(dataDir: config.dataDir)
        let bridge = try BridgeDriver(loop: loop, settings: settings, daemonID: id, driver: driver, store: store,
                                      logger: logger, registry: metrics.registry)
        driver.bridge = bridge
        self.bridge = bridge
        logger.info("bridge configured", ["broker": "\(settings.host):\(settings.port)", "prefix": settings.topicPrefix, "daemon_id": id,
                                          "user": settings.username ?? "-", "tls": settings.tls == nil ? "off" : "on", "retain": "full"])
    }
}
