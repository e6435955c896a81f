import Glibc
import InkRelay

/// `--bridge mqtt://[USER@]HOST:PORT [--bridge-password-file FILE] [--bridge-topic-prefix P]
/// [--bridge-daemon-id ID]`.
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

    public init(host: String, port: Int32, topicPrefix: String = BridgeSettings.defaultTopicPrefix, daemonID: String? = nil,
                username: String? = nil, passwordFile: String? = nil) {
        self.host = host
        self.port = port
        self.topicPrefix = topicPrefix
        self.daemonID = daemonID
        self.username = username
        self.passwordFile = passwordFile
    }

    static func parse(url: String?, prefix: String?, daemonID: String?, passwordFile: String? = nil) throws(ConfigError) -> BridgeSettings? {
        guard let url, url != "off" else {
            if prefix != nil || daemonID != nil || passwordFile != nil {
                throw ConfigError("--bridge-topic-prefix, --bridge-daemon-id and --bridge-password-file need --bridge")
            }
            return nil
        }
        guard url.hasPrefix("mqtt://") else { throw ConfigError("--bridge '\(url)': expected mqtt://HOST:PORT") }
        var rest = url.dropFirst("mqtt://".count)
        var username: String?
        if let at = rest.lastIndex(of: "@") {
            let user = rest[..<at]
            guard !user.isEmpty, user.utf8.count <= maxCredentialBytes, !user.contains(":") else {
                throw ConfigError("--bridge '\(url)': expected mqtt://USER@HOST:PORT (the password goes in --bridge-password-file)")
            }
            username = String(user)
            rest = rest[rest.index(after: at)...]
        }
        if passwordFile != nil && username == nil { throw ConfigError("--bridge-password-file needs a user: --bridge mqtt://USER@HOST:PORT") }
        guard let colon = rest.lastIndex(of: ":"), let port = Int32(rest[rest.index(after: colon)...]), (1...65_535).contains(port) else {
            throw ConfigError("--bridge '\(url)': expected mqtt://HOST:PORT with a port from 1 to 65535")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ConfigError("--bridge '\(url)': no host") }
        var settings = BridgeSettings(host: host, port: port, username: username, passwordFile: passwordFile)
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

/// 64 random bits from the system generator (the kernel's).
func randomUInt64() -> UInt64 {
    var generator = SystemRandomNumberGenerator()
    return generator.next()
}
