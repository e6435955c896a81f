import InkProtocol
import InkStore

/// Every setting of `inkwired`: its flag, its `INKWIRE_*` environment name, its help line.
/// One table drives parsing, `--help` and the man page, so they cannot disagree.
public struct ConfigFlag: Sendable {
    /// Flag name without the dashes (`udp` for `--udp`).
    public let name: String
    /// Placeholder in help (`HOST:PORT`); nil for switches that take no value.
    public let value: String?
    public let help: String
    /// May be given several times (environment and config file: comma-separated).
    public let repeatable: Bool
    /// Applied again on SIGHUP from the `--config` file.
    public let reloadable: Bool
    /// Left out of `--help` (test knobs).
    public let hidden: Bool

    init(_ name: String, _ value: String?, _ help: String, repeatable: Bool = false, reloadable: Bool = false, hidden: Bool = false) {
        self.name = name
        self.value = value
        self.help = help
        self.repeatable = repeatable
        self.reloadable = reloadable
        self.hidden = hidden
    }

    /// `INKWIRE_DATA_DIR` for `data-dir`.
    public var environmentName: String {
        "INKWIRE_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 })
    }

    /// Default ports, documented in --help and README: one number for UDP and TCP.
    public static let defaultPort: UInt16 = 7420
    public static let defaultUDP = "[::]:7420"
    public static let defaultTCP = "[::]:7420"
    public static let defaultDataDir = "./inkwire-data"
    /// The web listener's port in the shipped configuration: next to the native one.
    public static let defaultWebPort: UInt16 = 7421

    public static let all: [ConfigFlag] = [
        ConfigFlag("udp", "HOST:PORT", "native UDP (ARQ) listener; port 0 picks one; 'off' disables (default \(defaultUDP), IPv4 and IPv6)", repeatable: true),
        ConfigFlag("tcp", "HOST:PORT", "native TCP listener (length-prefixed frames); 'off' disables (default \(defaultTCP))", repeatable: true),
        ConfigFlag("legacy", "HOST:PORT=ROOM[@CIDRS]", "HYWhiteboard listener whose devices join ROOM (apps in client mode type this host's IP and PORT); with @CIDR,CIDR... only devices from those networks (IPv4, IPv6), others refused at accept (default none; legacy apps cannot encrypt)", repeatable: true),
        ConfigFlag("legacy-connect", "HOST:PORT=ROOM", "connect to a HYWhiteboard app in server mode at HOST:PORT (the IP and port it shows), into ROOM; again with backoff when it goes (default none)", repeatable: true),
        ConfigFlag("legacy-connect-upload", "PORT", "port of a --legacy-connect app's image upload listener, where inkwired shows it the background of the page it shows; 'off' never (default \(LegacyBinding.appUploadPort), the app's)"),
        ConfigFlag("legacy-upload", "HOST:PORT[=ROOM][@CIDRS]", "HYWhiteboard image upload listener (the app's fixed port 57777): a JPEG an app uploads becomes the background of ROOM's current page; without =ROOM, of the room the app's board connection is in (default none)", repeatable: true),
        ConfigFlag("data-dir", "DIR", "room history directory, SQLite (default \(defaultDataDir))"),
        ConfigFlag("durability", "MODE", "always | batch | off: when a batch counts as durable (default batch)"),
        ConfigFlag("retain", "WHAT", "full | board: keep every batch, or compact to the board (default board)"),
        ConfigFlag("max-room-history-bytes", "BYTES", "history one room keeps (stored batch payloads); a batch past it is refused (default \(StoreLimits().maxRoomHistoryBytes); reloaded on SIGHUP)"),
        ConfigFlag("max-background-bytes", "BYTES", "largest background image (JPEG or PNG) one upload may store (default \(StoreLimits().maxBlobBytes))"),
        ConfigFlag("room-background-quota-bytes", "BYTES", "background image bytes one room stores in all (default \(StoreLimits().maxRoomBlobBytes))"),
        ConfigFlag("room-idle-expiry", "DURATION", "delete a room with no batch and no member for this long: 90s, 15m, 12h, 30d; 0 never (default 30d; reloaded on SIGHUP)"),
        ConfigFlag("token-secret-file", "FILE", "HMAC-SHA256 secret for join tokens; without it rooms are open (reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("key-file", "FILE", "the daemon's private key, 64 hex digits (e.g. a systemd credential); never written (default: daemon-key in --data-dir, created mode 0600)"),
        ConfigFlag("print-public-key", nil, "print the daemon's public key (creating the key if needed) for devices to pin, and exit"),
        ConfigFlag("metrics", "HOST:PORT", "serve Prometheus /metrics here (default off)"),
        ConfigFlag("web", "HOST:PORT", "web listener: status page, board pages, browsers' sessions (HTTPS and HTTP on one port); 'off' disables (default off; the shipped config: [::]:\(defaultWebPort))", repeatable: true),
        ConfigFlag("web-cert-file", "FILE", "TLS certificate chain (PEM) of the web listener; without it the daemon makes a self-signed one in the data dir (default none)"),
        ConfigFlag("web-key-file", "FILE", "private key (PEM) of --web-cert-file (default none)"),
        ConfigFlag("web-origin", "ORIGIN", "another page origin (scheme://host[:port]) allowed to open a WebSocket, e.g. behind a proxy (default: only the daemon's own)", repeatable: true),
        ConfigFlag("max-web-connections", "N", "most web connections at once (default \(DaemonLimits.defaults.maxWebConnections); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("bridge", "mqtt://HOST:PORT", "share rooms with other daemons through this MQTT broker (mqtt://USER@HOST:PORT logs in as USER; mqtts:// for TLS); keeps full history (--retain full) (default off)"),
        ConfigFlag("bridge-topic-prefix", "PREFIX", "topic prefix on the broker (default \(BridgeSettings.defaultTopicPrefix))"),
        ConfigFlag("bridge-daemon-id", "ID", "this daemon's id on the broker (default: a random id kept in the data dir)"),
        ConfigFlag("bridge-password-file", "FILE", "password of the broker user in --bridge mqtt://USER@HOST:PORT: the file's first line (default none)"),
        ConfigFlag("bridge-ca-file", "FILE", "with mqtts://: PEM CA certificates the broker's certificate must chain to (default the system's, \(BridgeTLS.systemCADirectory))"),
        ConfigFlag("bridge-cert-file", "FILE", "with mqtts://: client certificate (PEM) for a broker that requires one, with --bridge-key-file (default none)"),
        ConfigFlag("bridge-key-file", "FILE", "with mqtts://: the client certificate's unencrypted private key (PEM), not readable by others (default none)"),
        ConfigFlag("log-level", "LEVEL", "debug | info | notice | warning | error (default info; reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("config", "FILE", "file of INKWIRE_NAME=value lines (as deploy/inkwired.env), re-read on SIGHUP"),
        ConfigFlag("max-sessions", "N", "most native sessions at once (default \(DaemonLimits.defaults.maxSessions); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("max-rooms", "N", "most rooms held in memory: rooms with history, and rooms with members (default \(DaemonLimits.defaults.maxRooms); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("max-members", "N", "most members per room (default \(DaemonLimits.defaults.maxMembersPerRoom); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("max-sessions-per-user", "N", "sessions one user name may hold in one room; at the bound its oldest idle session makes way, else the join is refused; 0 no bound (default \(DaemonLimits.defaults.maxSessionsPerUser); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("max-sessions-per-address", "N", "native and web sessions one device address may hold in one room (teacher and presenter tokens are not held back); 0 no bound (default \(DaemonLimits.defaults.maxSessionsPerAddress); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("max-legacy-per-address", "N", "HYWhiteboard connections one device address may hold in one legacy room; 0 no bound (default \(DaemonLimits.defaults.maxLegacyPerAddress); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("member-reserve", "N", "with join tokens: places of --max-members only teacher and presenter tokens may take; in a full room such a token takes an idle member's place (default \(DaemonLimits.defaults.memberReserve); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("member-timeout", "DURATION", "close a native or web member that sends nothing for this long (devices send a keepalive every \(SessionKeepalive.interval.microseconds / 1_000_000) s; legacy apps are timed out by their heartbeat); 0 never (default \(DaemonLimits.defaults.memberTimeoutMs / 1000)s; reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("member-idle-after", "DURATION", "a member that has not drawn for this long is idle: it is the one that makes way for a quota (default \(DaemonLimits.defaults.memberIdleMs / 1000)s; reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("rooms-per-address-per-minute", "N", "without --token-secret-file: rooms one device address may create per minute; 0 no bound (default \(DaemonLimits.defaults.roomsPerAddressPerMinute); reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("empty-room-expiry", "DURATION", "release a room with no member and no history from memory after this long, so its --max-rooms place comes back; 0 never (default \(DaemonLimits.defaults.emptyRoomExpiryMs / 1000)s; reloaded on SIGHUP)", reloadable: true),
        ConfigFlag("quota-exempt-networks", "CIDRS", "networks no per-address quota counts (a reverse proxy, local tools); none for none (default 127.0.0.1/32,::1/128; reloaded on SIGHUP)", repeatable: true, reloadable: true),
        ConfigFlag("max-datagram", "BYTES", "largest UDP datagram accepted (default \(DaemonLimits.defaults.maxDatagramBytes))", reloadable: true),
        ConfigFlag("max-frame", "BYTES", "largest native TCP frame accepted (default \(DaemonLimits.defaults.maxFrameBytes))", reloadable: true),
        ConfigFlag("new-sessions-per-second", "N", "new sessions one source address may open per second (default \(DaemonLimits.defaults.newSessionsPerSecond))", reloadable: true),
        ConfigFlag("max-handshakes-per-second", "N", "native handshakes per second from all sources; past it a busy notice (default \(DaemonLimits.defaults.maxHandshakesPerSecond))", reloadable: true),
        ConfigFlag("tcp-rto-max-ms", "MS", "ceiling of a TCP stream's retransmission timeout, Linux 6.15+; 0 keeps the kernel's 120 s (default \(DaemonLimits.defaults.tcpRetransmitCeilingMs); reloaded on SIGHUP for new connections)", reloadable: true),
        ConfigFlag("shutdown-timeout-ms", "MS", "longest a graceful stop may take before exiting anyway (default \(DaemonLimits.defaults.shutdownTimeoutMs))"),
        ConfigFlag("check-config", nil, "validate flags, environment and files, then exit (non-zero on error)"),
        ConfigFlag("version", nil, "print the version and exit"),
        ConfigFlag("help", nil, "print this help and exit (also -h)"),
        // Test knobs: legacy timing (the app's own values are 3 s and 9 s).
        ConfigFlag("legacy-heartbeat-ms", "MS", "legacy heartbeat interval", reloadable: true, hidden: true),
        ConfigFlag("legacy-timeout-ms", "MS", "legacy silent-peer timeout", reloadable: true, hidden: true),
        ConfigFlag("legacy-screen-wait-ms", "MS", "legacy: heartbeats only for this long after connecting (default 1000)", reloadable: true, hidden: true),
        // Test knob: how long a WebSocket may be silent before a ping (twice: closed).
        ConfigFlag("web-idle-ms", "MS", "web socket silence before a ping", reloadable: true, hidden: true),
        // Test knob: the room log's backlog bound in writes (default 65536), to reach it quickly.
        ConfigFlag("store-backlog-ops", "N", "room log backlog bound in writes", hidden: true),
        // Benchmark knob: the unsealed baseline of inkwire-bench fanout. Sessions are NOT encrypted.
        ConfigFlag("insecure-unsealed-benchmark", nil, "benchmarks only: sessions are not encrypted", hidden: true),
    ]

    public static func named(_ name: String) -> ConfigFlag? { all.first { $0.name == name } }

    /// One-letter spellings (`-h` is `--help`).
    public static let shortForms = ["-h": "help"]

    /// The `--help` text.
    public static func helpText(version: String) -> String {
        var out = """
            inkwired \(version): the Inkwire whiteboard relay daemon.

            Usage: inkwired [options]
                   inkwired backup --to FILE [--data-dir DIR | --config FILE]
                   inkwired restore --from FILE [--data-dir DIR | --config FILE]
            Every option also reads from the environment as INKWIRE_NAME (--data-dir: INKWIRE_DATA_DIR);
            precedence: flags, then the environment, then the --config file, then defaults.
            Repeatable options take comma-separated lists in the environment.

            Options:

            """
        for flag in all where !flag.hidden {
            var left = "  --\(flag.name)"
            if let value = flag.value { left += " \(value)" }
            let pad = max(2, 34 - left.count)  // two spaces at least: deploy/gen-man.sh splits columns on them
            out += left + String(repeating: " ", count: pad) + flag.help + "\n"
        }
        out += "\nCommands:\n"
        for command in DaemonCommand.allCases {
            let left = "  \(command.rawValue) --\(command.option.name) \(command.option.value)"
            out += left + String(repeating: " ", count: max(2, 34 - left.count)) + command.option.help + "\n"
        }
        out += """

            Exit codes: 0 stopped cleanly, 1 the start failed (a restart may work), 2 bad configuration,
            65 the room log is from a newer release (or not a room log); the unit restarts on 1 only.
            Signals: SIGHUP reloads the token secret, log level and limits; SIGTERM/SIGINT stop gracefully.
            The daemon logs one logfmt line per event on stderr, and a line with msg="ready" (with the bound
            addresses) once it accepts traffic.

            """
        return out
    }
}
