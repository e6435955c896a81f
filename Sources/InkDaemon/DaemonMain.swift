import Glibc
import InkCrypto
import InkProtocol
import InkVersion

/// Exit codes of `inkwired` (its unit's `RestartPreventExitStatus=` names the ones a restart
/// cannot cure). systemd shows them as 1/FAILURE, 2/INVALIDARGUMENT and 65/DATAERR.
public enum DaemonExit {
    public static let ok: Int32 = 0
    /// The start failed (an address in use or not yet there, the data directory, an I/O
    /// error): `Restart=on-failure` tries again.
    public static let startFailed: Int32 = 1
    /// A flag, an `INKWIRE_*` variable, the `--config` file or a file it names cannot be used.
    public static let badConfiguration: Int32 = 2
    /// The room log cannot be used by this version: written by a newer inkwired (schema), or
    /// not an Inkwire room log. Nothing is changed; see `inkwired restore`.
    public static let dataRefused: Int32 = 65
}

/// The `inkwired` program: flags, `--help`, `--version`, `--check-config`, then the daemon.
public enum DaemonMain {
    /// Exit code for a configuration that cannot be used.
    public static let configErrorExitCode = DaemonExit.badConfiguration

    public static func run(arguments: [String], environment: [String: String]) -> Int32 {
        // A peer that resets a connection must give EPIPE, not kill the daemon.
        signal(SIGPIPE, SIG_IGN)
        // A parent may have blocked the signals the daemon is driven by.
        var driving = sigset_t()
        sigemptyset(&driving)
        for signum in [SIGHUP, SIGTERM, SIGINT] { sigaddset(&driving, signum) }
        sigprocmask(SIG_UNBLOCK, &driving, nil)
        if let first = arguments.first, let command = DaemonCommand(rawValue: first) {
            return command.run(Array(arguments.dropFirst()), environment: environment)
        }
        let config: DaemonConfig
        do {
            config = try DaemonConfig.parse(arguments: arguments, environment: environment, readFile: FileSystem.readText)
        } catch {
            printError("inkwired: \(error)")
            return configErrorExitCode
        }
        if config.showHelp {
            print(ConfigFlag.helpText(version: InkwireVersion.string), terminator: "")
            return 0
        }
        if config.showVersion {
            print("inkwired \(InkwireVersion.string) (commit \(InkwireVersion.commit))")
            return 0
        }
        if config.printPublicKey {
            do {
                let loaded = try DaemonKey.load(config, crypto: OpenSSLCrypto.shared)
                print(PublicKeyText.encode(loaded.pair.publicKey))
                return 0
            } catch {
                printError("inkwired: \(error)")
                return error.exitCode
            }
        }
        if config.checkOnly {
            do {
                _ = try Daemon.loadTokenVerifier(config)
                // A --key-file must be readable; the data dir's key is made at the first start.
                if config.keyFile != nil { _ = try DaemonKey.load(config, crypto: OpenSSLCrypto.shared) }
                _ = try config.bridge?.readPassword()
                try config.bridge?.tls?.checkFiles()
                if let problem = FileSystem.makeDirectories(config.dataDir) { throw ConfigError("--data-dir \(problem)") }
            } catch {
                printError("inkwired: \(error)")
                return configErrorExitCode
            }
            print("inkwired: configuration ok (udp \(list(config.udp)), tcp \(list(config.tcp)), legacy \(config.legacy.isEmpty ? "off" : config.legacy.map { "\($0.address)=\($0.room)" + ($0.networks.isEmpty ? "" : "@" + $0.networks.map(\.description).joined(separator: ",")) }.joined(separator: " ")), legacy-connect \(config.legacyConnect.isEmpty ? "off" : config.legacyConnect.map { "\($0.address)=\($0.room)" }.joined(separator: " ")), data-dir \(config.dataDir), tokens \(config.tokenSecretFile == nil ? "open" : "required"))")
            return 0
        }
        let logger = Logger(level: config.logLevel, environment: environment)
        do {
            let daemon = try Daemon(config: config, arguments: arguments, environment: environment, logger: logger)
            try daemon.start()
            return daemon.run()
        } catch {
            logger.error("cannot start", ["error": error])
            return error.exitCode
        }
    }

    private static func list(_ addresses: [some CustomStringConvertible]) -> String {
        addresses.isEmpty ? "off" : addresses.map(\.description).joined(separator: ",")
    }

    static func printError(_ text: String) {
        let line = text + "\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }
}
