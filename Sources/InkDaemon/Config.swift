import InkProtocol
import InkStore
import InkUV

/// Bounds that keep one daemon's memory and CPU predictable; all reloadable on SIGHUP.
public struct DaemonLimits: Sendable, Equatable {
    public var maxSessions = 4096
    public var maxRooms = 1024
    public var maxMembersPerRoom = 256
    /// Largest datagram read from a peer; larger ones are dropped and counted.
    public var maxDatagramBytes = PacketCodec.maxDatagramBytes
    /// Largest native TCP frame; a larger announced length closes the connection.
    public var maxFrameBytes = 1 << 20
    /// New native sessions one source address may open per second (token bucket).
    public var newSessionsPerSecond = 20
    /// Handshakes (initiations opened) per second, all sources together: each costs three
    /// X25519 operations (about 0.15 ms), so a flood of initiations cannot take the CPU.
    public var maxHandshakesPerSecond = 1000
    public var shutdownTimeoutMs: UInt64 = 5000
    /// The app's own heartbeat interval and silent-peer timeout.
    public var legacyHeartbeatMs: UInt64 = 3000
    public var legacyTimeoutMs: UInt64 = 9000
    /// How long after a legacy app connects nothing but heartbeats is sent (its whiteboard
    /// screen must be up to take data; see `LegacySessionConfiguration.screenWait`).
    public var legacyScreenWaitMs: UInt64 = 1000
    /// Ceiling of an accepted TCP stream's retransmission timeout, ms (0: the kernel's 120 s);
    /// see `TCPRetransmitPolicy`. Needs Linux 6.15+. The ARQ's own probe-timeout ceiling.
    public var tcpRetransmitCeilingMs = UInt32(ARQConfiguration().maxRTO.microseconds / 1000)
    /// Connections the web listener holds at once (pages loading, browsers' WebSockets).
    public var maxWebConnections = 1024
    /// A WebSocket silent this long gets a ping; silent twice as long it is closed (test knob).
    public var webIdleMs: UInt64 = 20_000

    // Admission quotas (`RelayQuotas`; docs/relay.md, Admission). 0: no bound.
    /// Sessions one user name holds in one room (`--max-sessions-per-user`).
    public var maxSessionsPerUser = 4
    /// Native and web sessions one device address holds in one room (`--max-sessions-per-address`).
    public var maxSessionsPerAddress = 8
    /// Legacy connections one device address holds in one room (`--max-legacy-per-address`).
    public var maxLegacyPerAddress = 3
    /// Places of a room kept for teacher and presenter tokens (`--member-reserve`).
    public var memberReserve = 8
    /// A native or web member silent this long is closed, ms (`--member-timeout`; 0 never).
    public var memberTimeoutMs: UInt64 = 120_000
    /// A member that has not drawn for this long is idle, ms (`--member-idle-after`).
    public var memberIdleMs: UInt64 = 60_000
    /// Rooms one address may create per minute when rooms are open (`--rooms-per-address-per-minute`).
    public var roomsPerAddressPerMinute = 10
    /// An empty room without history leaves memory after this long, ms (`--empty-room-expiry`; 0 never).
    public var emptyRoomExpiryMs: UInt64 = 60_000
    /// Networks the per-address quotas do not count (`--quota-exempt-networks`): the daemon's
    /// own host, where a reverse proxy or local tools connect from.
    public var quotaExemptNetworks = DaemonLimits.defaultQuotaExemptNetworks

    public static let defaultQuotaExemptNetworks = [try! AddressPrefix.parse("127.0.0.1/32"), try! AddressPrefix.parse("::1/128")]

    public static let defaults = DaemonLimits()
    public init() {}
}

/// One `--legacy HOST:PORT=ROOM` listener, or one `--legacy-connect HOST:PORT=ROOM` app in
/// server mode that inkwired connects to.
public struct LegacyBinding: Sendable, Equatable {
    public var address: SocketAddress
    public var room: String
    /// `--legacy HOST:PORT=ROOM@CIDR,CIDR...`: the only networks whose devices the listener
    /// admits (a device elsewhere is refused at accept). Empty: every address.
    public var networks: [AddressPrefix] = []

    /// Most networks one listener takes (a school's few subnets; each accept checks them all).
    public static let maxNetworks = 64
    /// The app's fixed image upload port (`kSocketUploadPort`).
    public static let appUploadPort: UInt16 = 57777
}

/// One `--legacy-upload HOST:PORT[=ROOM][@CIDR,...]` listener.
public struct LegacyUploadBinding: Sendable, Equatable {
    public var address: SocketAddress
    /// Nil: each upload goes to the room of the app's own legacy board connection.
    public var room: String?
    public var networks: [AddressPrefix] = []
}

/// What `inkwired` was asked to do.
public struct DaemonConfig: Sendable, Equatable {
    public var udp: [SocketAddress] = [SocketAddress("[::]:\(ConfigFlag.defaultPort)")!]
    public var tcp: [SocketAddress] = [SocketAddress("[::]:\(ConfigFlag.defaultPort)")!]
    public var legacy: [LegacyBinding] = []
    /// `--legacy-connect`: apps in server mode inkwired connects to (and again, with backoff).
    public var legacyConnect: [LegacyBinding] = []
    /// `--legacy-connect-upload`: the port on each such app's host where its background is
    /// pushed (the app's upload listener); nil: never.
    public var legacyConnectUploadPort: UInt16? = LegacyBinding.appUploadPort
    /// `--legacy-upload HOST:PORT[=ROOM][@CIDR,...]`: the app's image upload listeners.
    public var legacyUpload: [LegacyUploadBinding] = []
    public var dataDir = ConfigFlag.defaultDataDir
    public var durability = Durability.batch
    public var retain = Retention.board
    /// A room's kept history (payload bytes of its stored batches) stays under this; a batch
    /// past it is refused with `historyFull` (`--max-room-history-bytes`).
    public var maxRoomHistoryBytes = StoreLimits().maxRoomHistoryBytes
    /// Largest background image one upload stores (`--max-background-bytes`).
    public var maxBackgroundBytes = StoreLimits().maxBlobBytes
    /// Background image bytes one room stores in all (`--room-background-quota-bytes`).
    public var roomBackgroundQuotaBytes = StoreLimits().maxRoomBlobBytes
    /// A room with no batch for this long and no member is deleted (0: never; `--room-idle-expiry`).
    public var roomIdleExpiryMs = StoreLimits().idleRoomExpiryMs
    /// Test knob: the store's backlog bound in writes (`--store-backlog-ops`).
    public var storeBacklogOps: Int?
    public var tokenSecretFile: String?
    /// `--key-file`: the daemon's private key (never created); nil: `daemon-key` in the data dir.
    public var keyFile: String?
    /// `--print-public-key`: print the daemon's public key and exit.
    public var printPublicKey = false
    /// Benchmark knob: sessions run the protocol with `FakeCrypto`, i.e. NOT encrypted.
    public var insecureUnsealed = false
    public var metrics: SocketAddress?
    /// `--web`: the status page, board pages and browsers' WebSocket sessions (off by default;
    /// the shipped configuration turns it on at `[::]:7421`).
    public var web: [SocketAddress] = []
    /// `--web-cert-file`/`--web-key-file`; without them the daemon makes its own.
    public var webCertFile: String?
    public var webKeyFile: String?
    /// `--web-origin`: page origins allowed to open a WebSocket besides the daemon's own.
    public var webOrigins: [String] = []
    /// `--bridge`: the broker and topics rooms are bridged through (nil: not bridged).
    public var bridge: BridgeSettings?
    public var logLevel = LogLevel.info
    public var configFile: String?
    public var limits = DaemonLimits()
    public var checkOnly = false
    public var showVersion = false
    public var showHelp = false

    public init() {}
}

/// A setting that cannot be used, with the flag it came from; or, with another `exitCode`, a
/// start that failed for a reason outside the configuration.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    /// What `inkwired` exits with (`DaemonExit`).
    public let exitCode: Int32
    public init(_ message: String, exitCode: Int32 = DaemonExit.badConfiguration) {
        self.message = message
        self.exitCode = exitCode
    }
    public var description: String { message }

    /// The configuration is fine but the start failed (a bind, the event loop, the disk): a
    /// restart may succeed.
    static func startFailed(_ message: String) -> ConfigError { ConfigError(message, exitCode: DaemonExit.startFailed) }
}

extension DaemonConfig {
    /// Longest room name accepted on the command line (the store's bound).
    public static let maxRoomNameBytes = SessionMessageCodec.maxRoomNameBytes

    /// Reads flags over the environment over the `--config` file over defaults.
    /// `readFile` returns a file's text or nil (injected so tests need no files). SIGHUP parses
    /// again with the flags and environment the process started with and the file as it is now,
    /// so a line removed from the file stops applying at the next reload.
    public static func parse(
        arguments: [String], environment: [String: String], readFile: (String) -> String?
    ) throws(ConfigError) -> DaemonConfig {
        let fromFlags = try flagValues(arguments)
        let fromEnvironment = environmentValues(environment)
        var values: [String: [String]] = [:]
        if let configPath = fromFlags["config"]?.last ?? fromEnvironment["config"]?.last {
            guard let text = readFile(configPath) else { throw ConfigError("--config \(configPath): cannot read the file") }
            values = try fileValues(text, path: configPath)
            values["config"] = [configPath]
        }
        for (key, value) in fromEnvironment { values[key] = value }
        for (key, value) in fromFlags { values[key] = value }
        return try build(values)
    }

    /// `--name value`, `--name=value`, `-h` and switches, in order; repeatable ones accumulate.
    static func flagValues(_ arguments: [String]) throws(ConfigError) -> [String: [String]] {
        var values: [String: [String]] = [:]
        var index = 0
        while index < arguments.count {
            var argument = arguments[index]
            index += 1
            if let long = ConfigFlag.shortForms[argument] { argument = "--" + long }
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw ConfigError("unexpected argument '\(argument)' (see --help)")
            }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let flag = ConfigFlag.named(name) else { throw ConfigError("unknown option --\(name) (see --help)") }
            let value: String
            if flag.value == nil {
                guard inline == nil else { throw ConfigError("--\(name) takes no value") }
                value = "true"
            } else if let inline {
                value = inline
            } else {
                guard index < arguments.count else { throw ConfigError("--\(name) needs a value \(flag.value!)") }
                value = arguments[index]
                index += 1
            }
            if flag.repeatable { values[name, default: []].append(value) } else { values[name] = [value] }
        }
        return values
    }

    static func environmentValues(_ environment: [String: String]) -> [String: [String]] {
        var values: [String: [String]] = [:]
        for flag in ConfigFlag.all where flag.value != nil {
            guard let text = environment[flag.environmentName], !text.isEmpty else { continue }
            values[flag.name] = split(text, flag)
        }
        return values
    }

    /// `INKWIRE_NAME=value` lines; blank lines and `#` comments skipped, values may be quoted.
    static func fileValues(_ text: String, path: String) throws(ConfigError) -> [String: [String]] {
        var values: [String: [String]] = [:]
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingSpaces()
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigError("\(path):\(number + 1): expected INKWIRE_NAME=value")
            }
            let key = String(line[..<equals])
            var value = String(line[line.index(after: equals)...])
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            guard let flag = ConfigFlag.all.first(where: { $0.environmentName == key && $0.value != nil }) else {
                throw ConfigError("\(path):\(number + 1): unknown setting \(key)")
            }
            // Older examples named the file itself here (for the unit's EnvironmentFile=).
            if flag.name == "config" {
                guard value == path else { throw ConfigError("\(path):\(number + 1): INKWIRE_CONFIG cannot name another file") }
                continue
            }
            values[flag.name] = value.isEmpty ? nil : split(value, flag)
        }
        return values
    }

    private static func split(_ text: String, _ flag: ConfigFlag) -> [String] {
        flag.repeatable ? text.split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty } : [text]
    }

    static func build(_ values: [String: [String]]) throws(ConfigError) -> DaemonConfig {
        var config = DaemonConfig()
        func one(_ name: String) -> String? { values[name]?.last }
        if one("help") != nil { config.showHelp = true }
        if one("version") != nil { config.showVersion = true }
        if one("check-config") != nil { config.checkOnly = true }
        if one("print-public-key") != nil { config.printPublicKey = true }
        if one("insecure-unsealed-benchmark") != nil { config.insecureUnsealed = true }
        if let path = one("key-file") {
            guard !path.isEmpty else { throw ConfigError("--key-file must not be empty") }
            config.keyFile = path
        }
        if let list = values["udp"] { config.udp = try addresses(list, flag: "udp") }
        if let list = values["tcp"] { config.tcp = try addresses(list, flag: "tcp") }
        if let list = values["legacy-upload"] {
            config.legacyUpload = []
            for text in list { config.legacyUpload.append(try legacyUploadBinding(text)) }
        }
        if let list = values["legacy"] {
            config.legacy = []
            for text in list { try addLegacyListener(text, to: &config.legacy) }
        }
        if let list = values["legacy-connect"] {
            config.legacyConnect = []
            for text in list { config.legacyConnect.append(try legacyBinding(text, flag: "legacy-connect")) }
        }
        if let text = one("legacy-connect-upload") {
            if text == "off" {
                config.legacyConnectUploadPort = nil
            } else {
                guard let port = UInt16(text), port > 0 else { throw ConfigError("--legacy-connect-upload '\(text)': expected a port 1-65535 or off") }
                config.legacyConnectUploadPort = port
            }
        }
        if let dir = one("data-dir") {
            guard !dir.isEmpty else { throw ConfigError("--data-dir must not be empty") }
            config.dataDir = dir
        }
        if let text = one("durability") {
            guard let mode = Durability(rawValue: text) else {
                throw ConfigError("--durability '\(text)': expected always, batch or off")
            }
            config.durability = mode
        }
        if let text = one("retain") {
            switch text {
            case "full": config.retain = .full
            case "board": config.retain = .board
            default: throw ConfigError("--retain '\(text)': expected full or board")
            }
        }
        config.tokenSecretFile = one("token-secret-file")
        if let text = one("metrics"), text != "off" { config.metrics = try address(text, flag: "metrics") }
        if let list = values["web"] { config.web = try addresses(list, flag: "web") }
        config.webCertFile = one("web-cert-file")
        config.webKeyFile = one("web-key-file")
        guard (config.webCertFile == nil) == (config.webKeyFile == nil) else {
            throw ConfigError("--web-cert-file and --web-key-file go together (give both, or neither for a made certificate)")
        }
        for origin in values["web-origin"] ?? [] {
            let lower = origin.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), !lower.hasSuffix("/"), !lower.dropFirst(8).contains("/") else {
                throw ConfigError("--web-origin '\(origin)': expected scheme://host[:port], as a browser sends it")
            }
            config.webOrigins.append(lower)
        }
        config.bridge = try BridgeSettings.parse(url: one("bridge"), prefix: one("bridge-topic-prefix"), daemonID: one("bridge-daemon-id"),
                                                 passwordFile: one("bridge-password-file"),
                                                 tls: BridgeTLS(caFile: one("bridge-ca-file"), certificateFile: one("bridge-cert-file"), keyFile: one("bridge-key-file")))
        if let text = one("log-level") {
            guard let level = LogLevel(parsing: text) else {
                throw ConfigError("--log-level '\(text)': expected one of \(LogLevel.acceptedNames)")
            }
            config.logLevel = level
        }
        config.configFile = one("config")
        config.maxRoomHistoryBytes = try number(one("max-room-history-bytes"), "max-room-history-bytes", 1024...(1 << 40), config.maxRoomHistoryBytes)
        config.maxBackgroundBytes = try number(one("max-background-bytes"), "max-background-bytes", 1024...Int(SessionMessageCodec.maxBlobBytes),
                                               config.maxBackgroundBytes)
        config.roomBackgroundQuotaBytes = try number(one("room-background-quota-bytes"), "room-background-quota-bytes", 1024...(1 << 40),
                                                     config.roomBackgroundQuotaBytes)
        if let text = one("room-idle-expiry") { config.roomIdleExpiryMs = try duration(text, flag: "room-idle-expiry") }
        if let text = one("store-backlog-ops") { config.storeBacklogOps = try number(text, "store-backlog-ops", 2...1_000_000, 0) }
        var limits = DaemonLimits()
        limits.maxSessions = try number(one("max-sessions"), "max-sessions", 1...1_000_000, limits.maxSessions)
        limits.maxRooms = try number(one("max-rooms"), "max-rooms", 1...StoreLimits().maxRooms, limits.maxRooms)
        limits.maxMembersPerRoom = try number(one("max-members"), "max-members", 1...65_536, limits.maxMembersPerRoom)
        limits.maxDatagramBytes = try number(one("max-datagram"), "max-datagram", PacketCodec.minTransportBytes...PacketCodec.maxDatagramBytes, limits.maxDatagramBytes)
        limits.maxFrameBytes = try number(one("max-frame"), "max-frame", 64...(64 << 20), limits.maxFrameBytes)
        limits.newSessionsPerSecond = try number(one("new-sessions-per-second"), "new-sessions-per-second", 1...100_000, limits.newSessionsPerSecond)
        limits.maxHandshakesPerSecond = try number(one("max-handshakes-per-second"), "max-handshakes-per-second", 1...1_000_000, limits.maxHandshakesPerSecond)
        limits.shutdownTimeoutMs = UInt64(try number(one("shutdown-timeout-ms"), "shutdown-timeout-ms", 100...600_000, Int(limits.shutdownTimeoutMs)))
        limits.legacyHeartbeatMs = UInt64(try number(one("legacy-heartbeat-ms"), "legacy-heartbeat-ms", 10...600_000, Int(limits.legacyHeartbeatMs)))
        limits.legacyTimeoutMs = UInt64(try number(one("legacy-timeout-ms"), "legacy-timeout-ms", 10...3_600_000, Int(limits.legacyTimeoutMs)))
        limits.webIdleMs = UInt64(try number(one("web-idle-ms"), "web-idle-ms", 10...3_600_000, Int(limits.webIdleMs)))
        limits.maxWebConnections = try number(one("max-web-connections"), "max-web-connections", 1...100_000, limits.maxWebConnections)
        limits.legacyScreenWaitMs = UInt64(try number(one("legacy-screen-wait-ms"), "legacy-screen-wait-ms", 0...60_000, Int(limits.legacyScreenWaitMs)))
        limits.tcpRetransmitCeilingMs = UInt32(try number(one("tcp-rto-max-ms"), "tcp-rto-max-ms", 0...Int(tcpKernelRetransmitCeilingMs), Int(limits.tcpRetransmitCeilingMs)))
        limits.maxSessionsPerUser = try number(one("max-sessions-per-user"), "max-sessions-per-user", 0...65_536, limits.maxSessionsPerUser)
        limits.maxSessionsPerAddress = try number(one("max-sessions-per-address"), "max-sessions-per-address", 0...65_536, limits.maxSessionsPerAddress)
        limits.maxLegacyPerAddress = try number(one("max-legacy-per-address"), "max-legacy-per-address", 0...65_536, limits.maxLegacyPerAddress)
        limits.memberReserve = try number(one("member-reserve"), "member-reserve", 0...65_536, limits.memberReserve)
        guard limits.memberReserve < limits.maxMembersPerRoom else {
            throw ConfigError("--member-reserve \(limits.memberReserve) must be below --max-members \(limits.maxMembersPerRoom): lower it (0 keeps no places for teachers)")
        }
        if let text = one("member-timeout") { limits.memberTimeoutMs = try duration(text, flag: "member-timeout") }
        if limits.memberTimeoutMs != 0 && limits.memberTimeoutMs <= SessionKeepalive.interval.microseconds / 1000 {
            throw ConfigError("--member-timeout '\(one("member-timeout") ?? "")': must be 0 (never) or longer than the devices' keepalive, \(SessionKeepalive.interval.microseconds / 1_000_000) s")
        }
        if let text = one("member-idle-after") { limits.memberIdleMs = try duration(text, flag: "member-idle-after") }
        limits.roomsPerAddressPerMinute = try number(one("rooms-per-address-per-minute"), "rooms-per-address-per-minute", 0...60_000,
                                                     limits.roomsPerAddressPerMinute)
        if let text = one("empty-room-expiry") { limits.emptyRoomExpiryMs = try duration(text, flag: "empty-room-expiry") }
        if let list = values["quota-exempt-networks"] {
            limits.quotaExemptNetworks = []
            if list != ["none"] {
                for text in list {
                    do { limits.quotaExemptNetworks.append(try AddressPrefix.parse(text)) } catch {
                        throw ConfigError("--quota-exempt-networks '\(text)': \(error) (networks are CIDR,CIDR...: 127.0.0.1/32, fd00::/8; or none)")
                    }
                }
            }
        }
        config.limits = limits
        return config
    }

    private static func number(_ text: String?, _ flag: String, _ range: ClosedRange<Int>, _ fallback: Int) throws(ConfigError) -> Int {
        guard let text else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw ConfigError("--\(flag) '\(text)': expected a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// `90`, `90s`, `15m`, `12h`, `30d` (seconds without a unit), as milliseconds; `0` is never.
    static func duration(_ text: String, flag: String) throws(ConfigError) -> UInt64 {
        guard let seconds = DurationText.seconds(text, atMost: 3650 * 86_400) else {
            throw ConfigError("--\(flag) '\(text)': expected a duration like 90s, 15m, 12h or 30d (0: never), at most 3650d")
        }
        return seconds * 1000
    }

    private static func address(_ text: String, flag: String) throws(ConfigError) -> SocketAddress {
        do { return try SocketAddress.parse(text) } catch { throw ConfigError("--\(flag): \(error)") }
    }

    private static func addresses(_ list: [String], flag: String) throws(ConfigError) -> [SocketAddress] {
        if list == ["off"] { return [] }
        var out: [SocketAddress] = []
        for text in list { out.append(try address(text, flag: flag)) }
        return out
    }

    /// `HOST:PORT=ROOM` or `HOST:PORT=ROOM@CIDR,CIDR...`. The environment and the config file
    /// separate repeated values with commas too, so there a piece without `=` continues the
    /// network list of the listener before it.
    private static func addLegacyListener(_ text: String, to bindings: inout [LegacyBinding]) throws(ConfigError) {
        if !text.contains("="), let last = bindings.indices.last, !bindings[last].networks.isEmpty {
            bindings[last].networks += try legacyNetworks(Substring(text), whole: text)
            guard bindings[last].networks.count <= LegacyBinding.maxNetworks else {
                throw ConfigError("--legacy: at most \(LegacyBinding.maxNetworks) networks per listener")
            }
            return
        }
        guard let equals = text.firstIndex(of: "="), let at = text[equals...].lastIndex(of: "@") else {
            bindings.append(try legacyBinding(text, flag: "legacy"))
            return
        }
        var binding = try legacyBinding(String(text[..<at]), flag: "legacy")
        binding.networks = try legacyNetworks(text[text.index(after: at)...], whole: text)
        bindings.append(binding)
    }

    /// `HOST:PORT`, `HOST:PORT=ROOM`, either with `@CIDR,CIDR...`.
    private static func legacyUploadBinding(_ text: String) throws(ConfigError) -> LegacyUploadBinding {
        var head = Substring(text)
        var networks: [AddressPrefix] = []
        if let at = text.lastIndex(of: "@") {
            networks = try legacyNetworks(text[text.index(after: at)...], whole: text)
            head = text[..<at]
        }
        if head.contains("=") {
            let binding = try legacyBinding(String(head), flag: "legacy-upload")
            return LegacyUploadBinding(address: binding.address, room: binding.room, networks: networks)
        }
        guard let address = SocketAddress(String(head)) else {
            throw ConfigError("--legacy-upload '\(text)': expected HOST:PORT[=ROOM][@CIDR,CIDR...]")
        }
        return LegacyUploadBinding(address: address, room: nil, networks: networks)
    }

    private static func legacyNetworks(_ list: Substring, whole: String) throws(ConfigError) -> [AddressPrefix] {
        let pieces = list.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces() }
        guard pieces.count <= LegacyBinding.maxNetworks else {
            throw ConfigError("--legacy '\(whole)': at most \(LegacyBinding.maxNetworks) networks per listener")
        }
        var networks: [AddressPrefix] = []
        for piece in pieces {
            do { networks.append(try AddressPrefix.parse(piece)) } catch {
                throw ConfigError("--legacy '\(whole)': \(error) (networks are CIDR,CIDR...: 10.0.0.0/8, fd00::/8; ROOM must not contain '@')")
            }
        }
        return networks
    }

    /// `HOST:PORT=ROOM` of `--legacy` (before any `@CIDR`) or `--legacy-connect`.
    private static func legacyBinding(_ text: String, flag: String) throws(ConfigError) -> LegacyBinding {
        guard let equals = text.firstIndex(of: "=") else {
            throw ConfigError("--\(flag) '\(text)': expected HOST:PORT=ROOM" + (flag == "legacy" ? "[@CIDR,CIDR...]" : ""))
        }
        let room = String(text[text.index(after: equals)...])
        guard !room.isEmpty, room.utf8.count <= maxRoomNameBytes,
              room.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else {
            throw ConfigError("--\(flag) '\(text)': ROOM must be 1 to \(maxRoomNameBytes) bytes without control characters")
        }
        let target = try address(String(text[..<equals]), flag: flag)
        if flag == "legacy-connect" && target.port == 0 { throw ConfigError("--legacy-connect '\(text)': the app's PORT is needed") }
        return LegacyBinding(address: target, room: room)
    }
}

/// `90`, `90s`, `15m`, `12h`, `30d` (seconds without a unit): settings and `inkwire token --ttl`.
public enum DurationText {
    /// The duration in seconds, nil unless it is digits with an optional unit and at most `atMost`.
    public static func seconds(_ text: String, atMost: UInt64) -> UInt64? {
        let units: [Character: UInt64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var digits = Substring(text)
        var unit: UInt64 = 1
        if let last = digits.last, let scale = units[last] {
            unit = scale
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.count <= 12, digits.allSatisfy({ ("0"..."9").contains($0) }), let value = UInt64(digits),
              value <= atMost / unit else { return nil }
        return value * unit
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var scalars = Substring(self).unicodeScalars[...]
        while let first = scalars.first, first == " " || first == "\t" || first == "\r" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" || last == "\r" { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }
}
