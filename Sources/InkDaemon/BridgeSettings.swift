import Glibc
import InkRelay

/// `--bridge mqtt://[USER@]HOST:PORT [--bridge-password-file FILE] [--bridge-topic-prefix P]
/// [--bridge-daemon-id ID]`; `mqtts://` for TLS, with `--bridge-ca-file FILE` and optionally
/// `--bridge-cert-file FILE --bridge-key-file FILE`.
public struct BridgeSettings: Sendable, Equatable {
    public static let defaultTopicPrefix = "inkwire"
    /// File in the data dir keeping the generated daemon id across restarts (a restarted
    /// home must recognise its own retained claim).
    public static let daemonIDFile = "bridge-daemon-id"

    public var host: String
    public var port: Int32
    public var topicPrefix = BridgeSettings.defaultTopicPrefix
    /// nil: read or create `daemonIDFile` in the data dir.
    public var daemonID: String?
    /// The broker user (`mqtt://USER@HOST:PORT`), so its ACLs can keep the prefix to daemons.
    public var username: String?
    /// The user's password: the first line of this file (read at start).
    public var passwordFile: String?
    /// Longest user name or password (MQTT strings are 65,535 bytes; brokers' far less).
    public static let maxCredentialBytes = 1024
    /// `mqtts://`: TLS to the broker.
    public var tls: BridgeTLS?

    public init(host: String, port: Int32, topicPrefix: String = BridgeSettings.defaultTopicPrefix, daemonID: String? = nil,
                username: String? = nil, passwordFile: String? = nil) {
        self.host = host
        self.port = port
        self.topicPrefix = topicPrefix
        self.daemonID = daemonID
        self.username = username
        self.passwordFile = passwordFile
    }

    static func parse(url: String?, prefix: String?, daemonID: String?, passwordFile: String? = nil,
                      tls files: BridgeTLS = BridgeTLS()) throws(ConfigError) -> BridgeSettings? {
        let tlsFlags = files.caFile != nil || files.certificateFile != nil || files.keyFile != nil
        guard let url, url != "off" else {
            if prefix != nil || daemonID != nil || passwordFile != nil || tlsFlags {
                throw ConfigError("--bridge-topic-prefix, --bridge-daemon-id, --bridge-password-file and the --bridge-*-file TLS settings need --bridge")
            }
            return nil
        }
        let secure = url.hasPrefix("mqtts://")
        guard secure || url.hasPrefix("mqtt://") else { throw ConfigError("--bridge '\(url)': expected mqtt://HOST:PORT or mqtts://HOST:PORT (TLS)") }
        if !secure && tlsFlags {
            throw ConfigError("--bridge-ca-file, --bridge-cert-file and --bridge-key-file need TLS: --bridge mqtts://HOST:PORT")
        }
        let scheme = secure ? "mqtts" : "mqtt"
        var rest = url.dropFirst(scheme.count + 3)
        var username: String?
        if let at = rest.lastIndex(of: "@") {
            let user = rest[..<at]
            guard !user.isEmpty, user.utf8.count <= maxCredentialBytes, !user.contains(":") else {
                throw ConfigError("--bridge '\(url)': expected \(scheme)://USER@HOST:PORT (the password goes in --bridge-password-file)")
            }
            username = String(user)
            rest = rest[rest.index(after: at)...]
        }
        if passwordFile != nil && username == nil { throw ConfigError("--bridge-password-file needs a user: --bridge mqtt://USER@HOST:PORT") }
        guard let colon = rest.lastIndex(of: ":"), let port = Int32(rest[rest.index(after: colon)...]), (1...65_535).contains(port) else {
            throw ConfigError("--bridge '\(url)': expected \(scheme)://HOST:PORT with a port from 1 to 65535")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ConfigError("--bridge '\(url)': no host") }
        var settings = BridgeSettings(host: host, port: port, username: username, passwordFile: passwordFile)
        if secure { settings.tls = try files.validated() }
        if let prefix {
            guard !prefix.isEmpty, prefix.utf8.count <= 128, !prefix.contains(where: { $0 == "+" || $0 == "#" }) else {
                throw ConfigError("--bridge-topic-prefix '\(prefix)': 1 to 128 bytes without + or #")
            }
            settings.topicPrefix = prefix
        }
        if let daemonID {
            guard validDaemonID(daemonID) else {
                throw ConfigError("--bridge-daemon-id '\(daemonID)': 1 to \(BridgeWire.maxNameBytes) letters, digits, '-', '.' or '_'")
            }
            settings.daemonID = daemonID
        }
        return settings
    }

    /// The password from `passwordFile` (its first line), nil without one.
    func readPassword() throws(ConfigError) -> String? {
        guard let passwordFile else { return nil }
        guard let text = FileSystem.readText(passwordFile) else {
            throw ConfigError("--bridge-password-file \(passwordFile): cannot read: \(FileSystem.errnoText())")
        }
        let password = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard !password.isEmpty, password.utf8.count <= BridgeSettings.maxCredentialBytes else {
            throw ConfigError("--bridge-password-file \(passwordFile): the first line must be the password (1 to \(BridgeSettings.maxCredentialBytes) bytes)")
        }
        return password
    }

    static func validDaemonID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= BridgeWire.maxNameBytes
            && id.unicodeScalars.allSatisfy { ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || "-._".unicodeScalars.contains($0) }
    }

    /// The configured id, else the one kept in `dataDir`, else a new random one written there.
    func resolveDaemonID(dataDir: String) throws(ConfigError) -> String {
        if let daemonID { return daemonID }
        let path = dataDir + "/" + BridgeSettings.daemonIDFile
        if let text = FileSystem.readText(path) {
            let id = text.trimmingSpaces().split(separator: "\n").first.map(String.init) ?? ""
            guard BridgeSettings.validDaemonID(id) else { throw ConfigError("\(path): not a daemon id; delete it or pass --bridge-daemon-id") }
            return id
        }
        let id = "d" + String(randomUInt64(), radix: 16)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { throw ConfigError("\(path): cannot create: \(FileSystem.errnoText())") }
        defer { close(fd) }
        let line = Array((id + "\n").utf8)
        guard line.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == line.count, fsync(fd) == 0 else {
            throw ConfigError("\(path): cannot write: \(FileSystem.errnoText())")
        }
        return id
    }
}

/// `--bridge mqtts://`: the files libmosquitto's TLS (OpenSSL) reads at each connect.
public struct BridgeTLS: Sendable, Equatable {
    /// Where the system keeps its trusted CAs (Debian's ca-certificates), used without a CA file.
    public static let systemCADirectory = "/etc/ssl/certs"
    /// Largest certificate or key file read (a system CA bundle is about 200 KB).
    public static let maxFileBytes = 4 << 20
    /// Longest path accepted (Linux's PATH_MAX).
    public static let maxPathBytes = 4096

    /// `--bridge-ca-file`: PEM CA certificates the broker's certificate must chain to; nil: the
    /// system's CAs (`systemCADirectory`).
    public var caFile: String?
    /// `--bridge-cert-file` and `--bridge-key-file`: a client certificate and its unencrypted
    /// key, for a broker that asks for one (`require_certificate true`).
    public var certificateFile: String?
    public var keyFile: String?

    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }

    func validated() throws(ConfigError) -> BridgeTLS {
        for (flag, path) in [("bridge-ca-file", caFile), ("bridge-cert-file", certificateFile), ("bridge-key-file", keyFile)] {
            guard let path else { continue }
            guard !path.isEmpty, path.utf8.count <= BridgeTLS.maxPathBytes, !path.utf8.contains(0) else {
                throw ConfigError("--\(flag): expected a file path of 1 to \(BridgeTLS.maxPathBytes) bytes")
            }
        }
        guard (certificateFile == nil) == (keyFile == nil) else {
            throw ConfigError("--bridge-cert-file and --bridge-key-file go together (a client certificate and its private key)")
        }
        return self
    }

    /// Reads each file as the daemon will at connect, so a wrong path, a file of the wrong kind
    /// or an encrypted key stops the start (and `--check-config`) with its own message instead
    /// of failing every connect. libmosquitto checks the key against the certificate at each
    /// connect (`Client certificate/key are inconsistent`).
    public func checkFiles() throws(ConfigError) {
        func pem(_ flag: String, _ path: String?, marker: String, what: String) throws(ConfigError) -> String? {
            guard let path else { return nil }
            guard let text = FileSystem.read(path, limit: BridgeTLS.maxFileBytes).map({ String(decoding: $0, as: UTF8.self) }) else {
                throw ConfigError("--\(flag) \(path): cannot read the file (or it is larger than \(BridgeTLS.maxFileBytes) bytes): \(FileSystem.errnoText())")
            }
            guard text.contains(marker) else { throw ConfigError("--\(flag) \(path): expected \(what) in PEM form (\(marker)...)") }
            return text
        }
        _ = try pem("bridge-ca-file", caFile, marker: "-----BEGIN CERTIFICATE-----", what: "CA certificates")
        _ = try pem("bridge-cert-file", certificateFile, marker: "-----BEGIN CERTIFICATE-----", what: "a certificate")
        if let key = try pem("bridge-key-file", keyFile, marker: "PRIVATE KEY-----", what: "a private key"), let keyFile {
            if key.contains("ENCRYPTED") {
                throw ConfigError("--bridge-key-file \(keyFile): the key is encrypted and the daemon cannot ask for its passphrase; store it unencrypted (openssl pkey -in KEY -out PLAIN) readable by the daemon only")
            }
            var info = stat()
            if stat(keyFile, &info) == 0, info.st_mode & S_IROTH != 0 {
                throw ConfigError("--bridge-key-file \(keyFile): every user may read this private key; chmod o-r it (or pass it as a systemd credential)")
            }
        }
    }

    /// The settings libmosquitto takes.
    var client: MQTTClient.TLS {
        MQTTClient.TLS(caFile: caFile, caDirectory: caFile == nil ? BridgeTLS.systemCADirectory : nil,
                       certificateFile: certificateFile, keyFile: keyFile)
    }
}

/// 64 random bits from the system generator (the kernel's).
func randomUInt64() -> UInt64 {
    var generator = SystemRandomNumberGenerator()
    return generator.next()
}
