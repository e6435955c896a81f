import Glibc
import InkProtocol

/// The daemon's static X25519 key pair (docs/protocol.md 8.4): `daemon-key` in the data
/// directory, created on first use with mode 0600, or `--key-file` (a systemd credential),
/// which is read and never written. Devices pin its public key.
enum DaemonKey {
    static let fileName = "daemon-key"

    /// The key and where it came from.
    struct Loaded {
        var pair: StaticKeyPair
        var path: String
        var created: Bool
    }

    static func load(_ config: DaemonConfig, crypto: any SessionCrypto) throws(ConfigError) -> Loaded {
        if let path = config.keyFile {
            guard let privateKey = try read(path, flag: "--key-file") else {
                throw ConfigError("--key-file \(path): cannot read the file")
            }
            return Loaded(pair: StaticKeyPair(privateKey: privateKey, crypto: crypto), path: path, created: false)
        }
        let path = config.dataDir + "/" + fileName
        if let privateKey = try read(path, flag: "--data-dir") {
            return Loaded(pair: StaticKeyPair(privateKey: privateKey, crypto: crypto), path: path, created: false)
        }
        if let problem = FileSystem.makeDirectories(config.dataDir) { throw .startFailed("--data-dir \(problem)") }
        let privateKey = crypto.randomBytes(SessionCryptoSizes.keyBytes)
        try create(path, privateKey: privateKey)
        return Loaded(pair: StaticKeyPair(privateKey: privateKey, crypto: crypto), path: path, created: true)
    }

    /// The private key in `path`, nil when the file does not exist. A file others may read, or
    /// that holds no key, is an error.
    private static func read(_ path: String, flag: String) throws(ConfigError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw ConfigError("\(flag): \(path): \(FileSystem.errnoText())")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ConfigError("\(flag): \(path): \(FileSystem.errnoText())") }
        guard info.st_mode & 0o077 == 0 else {
            throw ConfigError("\(path): the daemon's private key is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod 600 it")
        }
        var bytes = [UInt8](repeating: 0, count: 256)
        let count = Glibc.read(fd, &bytes, bytes.count)
        guard count >= 0 else { throw ConfigError("\(flag): \(path): \(FileSystem.errnoText())") }
        let content = Array(bytes[0..<count])
        if let key = parse(content) { return key }
        throw ConfigError("\(path): expected the daemon's private key as 64 hex digits (or 32 raw bytes)")
    }

    /// 64 hex digits with optional surrounding whitespace, or exactly 32 raw bytes.
    static func parse(_ content: [UInt8]) -> [UInt8]? {
        let trimmed = content.filter { $0 != 0x0a && $0 != 0x0d && $0 != 0x20 && $0 != 0x09 }
        if let key = PublicKeyText.hex(trimmed) { return key }
        return content.count == 32 ? content : nil
    }

    private static func create(_ path: String, privateKey: [UInt8]) throws(ConfigError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .startFailed("cannot create \(path): \(FileSystem.errnoText())") }
        defer { close(fd) }
        let text = Array((PublicKeyText.hexString(privateKey) + "\n").utf8)
        guard Glibc.write(fd, text, text.count) == text.count, fsync(fd) == 0 else {
            unlink(path)
            throw .startFailed("cannot write \(path): \(FileSystem.errnoText())")
        }
    }
}
