// Trust on first use (docs/protocol.md 8.4): the keys of daemons this user has joined, by
// server address, so an unpinned `inkwire` refuses a daemon whose key changed.
import Foundation
import InkProtocol

/// `~/.config/inkwire/known-daemons` (`$INKWIRE_KNOWN_DAEMONS`, or under `$XDG_CONFIG_HOME`):
/// lines `HOST:PORT KEY`. Without a home (a service's environment) nothing is kept.
struct KnownDaemons {
    let path: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let explicit = environment["INKWIRE_KNOWN_DAEMONS"], !explicit.isEmpty {
            path = explicit
        } else if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty {
            path = config + "/inkwire/known-daemons"
        } else if let home = environment["HOME"], !home.isEmpty {
            path = home + "/.config/inkwire/known-daemons"
        } else {
            path = nil
        }
    }

    /// The key kept for `server` (its `HOST:PORT`), if any.
    func key(for server: String) -> [UInt8]? {
        guard let path, let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, parts[0] == server, let key = PublicKeyText.decode(String(parts[1])) { return key }
        }
        return nil
    }

    /// Keeps `key` for `server`; false when the file cannot be written.
    func remember(_ key: [UInt8], for server: String) -> Bool {
        guard let path else { return false }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let line = "\(server) \(PublicKeyText.encode(key))\n"
            if let handle = FileHandle(forWritingAtPath: path) {
                defer { try? handle.close() }
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(line.utf8))
            } else {
                try Data(line.utf8).write(to: URL(fileURLWithPath: path))
            }
            return true
        } catch {
            return false
        }
    }
}
