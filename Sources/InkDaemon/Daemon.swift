import Glibc
import InkCrypto
import InkProtocol
import InkStore
import InkUV
import InkVersion

/// `inkwired`: one libuv loop moving bytes between sockets, the rooms and the durable log.
///
/// Life: `init` opens the store and reopens the rooms; `start` binds (or adopts) every listener,
/// logs `msg="ready"` with the bound addresses and notifies systemd; `run` drives the loop until
/// SIGTERM/SIGINT, then `Shutdown` stops accepting, says goodbye, flushes the log and returns 0.
public final class Daemon {
    var config: DaemonConfig
    let arguments: [String]
    let environment: [String: String]
    let logger: Logger
    let loop: EventLoop
    let notifier: SystemdNotifier
    let metrics = DaemonMetrics()
    let store: SQLiteRoomLogStore
    let driver: RelayDriver
    let authorizer: DaemonAuthorizer
    let legacyContext: LegacyContext
    let tcpRetransmitPolicy: TCPRetransmitPolicy
    /// Held while the daemon runs (`inkwired restore` waits for it to stop).
    private let dataDirectoryLock: DataDirectoryLock
    var tokenVerifier: TokenVerifier?
    /// The primitives of sealed sessions (OpenSSL; `FakeCrypto` only with the benchmark knob).
    let crypto: any SessionCrypto
    /// Sessions are really sealed (not the benchmark's unsealed baseline), as the status page says.
    var sealsSessions: Bool { !config.insecureUnsealed }
    /// The daemon's static key pair (docs/protocol.md 8.4) and the resets it derives.
    let staticKey: StaticKeyPair
    let resets: StatelessReset
    /// Unauthenticated answers (resets, notices, key replies, protocol 1 refusals) per second.
    var unsealedAnswers = RateBudget(perSecond: StatelessReset.maxPerSecond)
    /// Handshakes per second, all sources (`--max-handshakes-per-second`).
    var handshakes: RateBudget
    var legacyListeners: [LegacyListener] = []
    var legacyConnectors: [LegacyConnector] = []
    var legacyUploadListeners: [LegacyUploadListener] = []
    var udp: [UDPTransport] = []
    var tcp: [TCPTransport] = []
    var metricsServer: MetricsServer?
    /// `--web` listeners and their certificate.
    var web: [WebListener] = []
    var webCertificate: WebCertificate?
    /// The loop's clock at start (the status page's uptime).
    let startedAt: UInt64
    /// `--bridge`: rooms shared with other daemons through an MQTT broker.
    var bridge: BridgeDriver?
    var signals: [Signal] = []
    var housekeeping: LoopTimer?
    /// Woken by the store's writer thread after each commit.
    private let wakeup: LoopWakeup
    var lastStatus = ""
    var stopping = false
    var exitCode: Int32 = 0

    /// Group commit (`--durability batch`/`off`): at most one commit per interval. Every
    /// commit costs an fdatasync, about 10 % of the daemon's CPU at 2 ms with 50 busy rooms
    /// (~300 commits a second, under two batches each); at 10 ms a commit carries every room's
    /// batches of that interval. A batch after a quiet spell still commits at once, and acks
    /// still wait for their batch to be durable: only a busy daemon's acks come later (<= 10 ms).
    /// Not for a bridged daemon (`--bridge`): it publishes a batch to the other daemons once
    /// durable, so it keeps the store's 2 ms.
    static let groupCommitInterval: Duration = .milliseconds(10)

    /// How often the loop refreshes STATUS=, gauges and store failures.
    static let housekeepingMicroseconds: UInt64 = 1_000_000

    public init(config: DaemonConfig, arguments: [String], environment: [String: String], logger: Logger) throws(ConfigError) {
        self.config = config
        self.arguments = arguments
        self.environment = environment
        self.logger = logger
        notifier = SystemdNotifier(environment: environment)
        do { loop = try EventLoop() } catch { throw .startFailed("event loop: \(error)") }
        startedAt = loop.now
        tokenVerifier = try Daemon.loadTokenVerifier(config)
        if let problem = FileSystem.makeDirectories(config.dataDir) { throw .startFailed("--data-dir \(problem)") }
        dataDirectoryLock = try DataDirectoryLock.acquire(dataDir: config.dataDir).get()
        if config.insecureUnsealed {
            // A throwaway key: FakeCrypto's "public" key is its private key.
            let fake = FakeCrypto(seed: WallClock.milliseconds())
            crypto = fake
            staticKey = StaticKeyPair(privateKey: fake.randomBytes(32), crypto: fake)
            logger.warning("--insecure-unsealed-benchmark: native sessions are NOT encrypted (a benchmark baseline)")
        } else {
            crypto = OpenSSLCrypto.shared
            let loaded = try DaemonKey.load(config, crypto: crypto)
            staticKey = loaded.pair
            logger.info(loaded.created ? "daemon key created" : "daemon key loaded",
                        ["path": loaded.path, "public_key": PublicKeyText.encode(loaded.pair.publicKey)])
        }
        resets = StatelessReset(staticPrivateKey: staticKey.privateKey, crypto: crypto)
        handshakes = RateBudget(perSecond: config.limits.maxHandshakesPerSecond)
        let box = WeakDaemon()
        do { wakeup = try LoopWakeup(loop: loop) { box.daemon?.storeProgressed() } } catch { throw .startFailed("loop wakeup: \(error)") }
        let wakeup = self.wakeup
        var options = SQLiteRoomLogStore.Options()
        options.durability = config.durability
        // A bridged home answers late daemons from its whole log: keep every batch.
        options.defaultRetention = config.bridge != nil ? .full : config.retain
        options.limits.maxRooms = max(options.limits.maxRooms, config.limits.maxRooms)
        options.limits.maxRoomHistoryBytes = config.maxRoomHistoryBytes
        options.limits.idleRoomExpiryMs = config.roomIdleExpiryMs
        options.limits.maxBlobBytes = config.maxBackgroundBytes
        options.limits.maxRoomBlobBytes = config.roomBackgroundQuotaBytes
        if let ops = config.storeBacklogOps { options.limits.maxPendingOps = ops }
        options.onDurable = { [wakeup] in wakeup.wake() }
        // A bridged home publishes each batch once durable: its remote members wait for the commit.
        if config.bridge == nil { options.commitInterval = Daemon.groupCommitInterval }
        options.release = "inkwired \(InkwireVersion.string) (commit \(InkwireVersion.commit))"
        let path = config.dataDir + "/" + SQLiteRoomLogStore.fileName
        do { store = try SQLiteRoomLogStore(path: path, options: options) } catch {
            if case .schemaTooNew(let found, let supported) = error {
                throw ConfigError("room log \(path) has schema \(found), written by a newer inkwired; this one (\(InkwireVersion.string)) reads"
                                  + " schema \(supported) and older. Nothing was changed: install the newer release again, or restore the"
                                  + " copy taken before its upgrade (\(SQLiteRoomLogStore.defaultBackupDirectory(forDatabaseAt: path))/rooms-schema\(supported)-*.sqlite)"
                                  + " with inkwired restore", exitCode: DaemonExit.dataRefused)
            }
            throw .startFailed("cannot open the room log \(path): \(error)")
        }
        if let migration = store.migration {
            logger.notice("room log migrated; the copy taken before is kept", [
                "path": path, "from_schema": migration.fromVersion, "to_schema": migration.toVersion, "backup": migration.backupPath,
            ])
        }
        logger.info("room log opened", ["path": path, "schema": SQLiteSchema.currentVersion, "durability": config.durability.rawValue,
                                        "retain": config.retain])
        authorizer = DaemonAuthorizer(verifier: tokenVerifier)
        do {
            driver = try RelayDriver(loop: loop, store: store, logger: logger, metrics: metrics, limits: config.limits, authorizer: authorizer,
                                 maxRoomHistoryBytes: config.maxRoomHistoryBytes, maxBackgroundBytes: config.maxBackgroundBytes,
                                 bridged: config.bridge != nil)
        } catch {
            throw .startFailed("relay timer: \(error)")
        }
        driver.restoreRooms()
        tcpRetransmitPolicy = TCPRetransmitPolicy(ceilingMs: config.limits.tcpRetransmitCeilingMs, logger: logger)
        legacyContext = LegacyContext(loop: loop, driver: driver, logger: logger, metrics: metrics, limits: config.limits,
                                      tcpRetransmitPolicy: tcpRetransmitPolicy)
        box.daemon = self
        try openBridge()
    }

    static func loadTokenVerifier(_ config: DaemonConfig) throws(ConfigError) -> TokenVerifier? {
        guard let path = config.tokenSecretFile else { return nil }
        guard let bytes = FileSystem.read(path, limit: TokenVerifier.maximumSecretBytes + 2) else {
            throw ConfigError("--token-secret-file \(path): cannot read the file (or it is larger than \(TokenVerifier.maximumSecretBytes) bytes)")
        }
        return try TokenVerifier(fileContents: bytes, path: path)
    }

    /// Binds every listener, then logs the ready line and notifies systemd.
    public func start() throws(ConfigError) {
        let activation: SocketActivation?
        do { activation = try SocketActivation.fromProcessEnvironment(environment) } catch { throw .startFailed("\(error)") }
        try openListeners(activation: activation)
        do {
            try installSignals()
            let timer = try LoopTimer(loop: loop)
            timer.start(afterMicroseconds: Daemon.housekeepingMicroseconds, repeatingEveryMicroseconds: Daemon.housekeepingMicroseconds) { [weak self] in
                self?.housekeep()
            }
            housekeeping = timer
            try notifier.startWatchdog(loop: loop)
        } catch {
            throw .startFailed("event loop setup: \(error)")
        }
        if tokenVerifier == nil {
            logger.notice("no --token-secret-file: rooms are open, joins need no token")
        }
        bridge?.start()
        do {
            for binding in config.legacyConnect {
                legacyConnectors.append(try LegacyConnector(target: binding.address, room: binding.room, uploadPort: config.legacyConnectUploadPort,
                                                            context: legacyContext))
            }
        } catch {
            throw ConfigError("legacy connector: \(error)")
        }
        for connector in legacyConnectors { connector.start() }
        logReady()
        notifier.ready(status: statusText())
        resetPreviousSessions()
    }

    /// Tells every UDP device the previous run had that its session is gone (a stateless reset
    /// each), so it joins again at once instead of when it next sends.
    private func resetPreviousSessions() {
        let table = SessionTable.read(dataDir: config.dataDir)
        guard !table.isEmpty else { return }
        let sent = udp.reduce(0) { $0 + $1.sendRestartResets(table) }
        logger.info("reset the previous run's sessions", ["sessions": table.count, "resets": sent])
        saveSessionTable(force: true)
    }

    /// Rewrites `udp-sessions` when a UDP session opened, moved or closed since the last time.
    func saveSessionTable(force: Bool = false) {
        guard force || udp.contains(where: { $0.sessionsDirty }) else { return }
        let table = udp.flatMap { $0.takeSessionTable() }
        if !SessionTable.write(table, dataDir: config.dataDir) {
            metrics.errors(kind: "session_table").increment()
        }
    }

    /// Runs until shutdown; returns the exit code.
    public func run() -> Int32 {
        loop.run()
        loop.shutdown()
        return exitCode
    }

    /// One `msg="ready"` line with every bound address (`off` for a kind with none), logfmt.
    func logReady() {
        func joined(_ list: [String]) -> String { list.isEmpty ? "off" : list.joined(separator: ",") }
        let legacy = legacyListeners.compactMap { listener in listener.localAddress.map { "\($0)=\(listener.room)" } }
        let connect = legacyConnectors.map { "\($0.target)=\($0.room)" }
        // The ready line is the daemon's contract with scripts and tests: never filtered out.
        let level = logger.level
        logger.level = .debug
        defer { logger.level = level }
        logger.notice("ready", [
            "udp": joined(udp.compactMap { $0.localAddress?.description }),
            "tcp": joined(tcp.compactMap { $0.localAddress?.description }),
            "legacy": joined(legacy),
            "legacy_connect": joined(connect),
            "legacy_upload": joined(legacyUploadListeners.compactMap { l in l.localAddress.map { "\($0)" + (l.room.map { "=\($0)" } ?? "") } }),
            "metrics": metricsServer?.localAddress?.description ?? "off",
            "web": joined(web.compactMap { $0.localAddress?.description }),
            "bridge_id": bridge?.core.configuration.daemonID ?? "off",
            "public_key": PublicKeyText.encode(staticKey.publicKey),
            "version": InkwireVersion.string,
            "commit": InkwireVersion.commit,
            "pid": getpid(),
        ])
    }

    func statusText() -> String {
        "\(driver.roomCount) rooms, \(driver.memberCount) members, \(driver.sessionCount) sessions"
    }

    /// The writer thread committed: collect durable marks and failures.
    func storeProgressed() {
        driver.durable(store.pollDurable())
        let failures = store.pollFailures()
        for failure in failures { metrics.errors(kind: failure.isDiskFull ? "disk_full" : "store").increment() }
        driver.gate.absorb(failures, dataDir: config.dataDir)
        driver.retryHeldAppends()
    }

    private func housekeep() {
        storeProgressed()
        saveSessionTable()
        driver.expireIdleRooms()
        for transport in udp { transport.sampleSessions() }
        refreshGauges()
        let status = statusText()
        if status != lastStatus {
            lastStatus = status
            notifier.status(status)
        }
    }

    func refreshGauges() {
        bridge?.refreshMetrics()
        metrics.rooms.set(driver.roomCount)
        metrics.members.set(driver.memberCount)
        let usage = store.usage
        metrics.historyBytes.set(usage.historyBytes)
        metrics.storePending.set(usage.pendingOps)
        metrics.storeCommits.advance(to: usage.commits)
        metrics.storeCommitSeconds.advance(to: Double(usage.totalCommitMicros) / 1_000_000)
        metrics.process.sample()
        metrics.reorderDepth.set(udp.reduce(0) { $0 + $1.reorderDepth })
        metrics.showLimits(config.limits)
        if let dropped = metricsServer?.dropped {
            for (reason, count) in dropped { metrics.metricsConnectionsDropped.labels(reason).advance(to: count) }
        }
    }

    func renderMetrics() -> String {
        refreshGauges()
        return metrics.registry.render()
    }

    private func installSignals() throws(UVError) {
        for (signum, action) in [(Signal.hangUp, "reload"), (Signal.terminate, "stop"), (Signal.interrupt, "stop")] {
            let watcher = try Signal(loop: loop)
            try watcher.start(signum) { [weak self] _ in
                guard let self else { return }
                if action == "reload" { self.reload() } else { self.shutdown(signal: signum) }
            }
            signals.append(watcher)
        }
    }
}

/// Lets the store's wake-up reach the daemon without keeping it alive.
private final class WeakDaemon: @unchecked Sendable {
    weak var daemon: Daemon?
}
