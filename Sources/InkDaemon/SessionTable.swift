import Glibc
import InkUV

/// `udp-sessions` in the data directory: the connection ids and addresses of the daemon's UDP
/// sessions, rewritten at most once a second when they changed, so that a restarted daemon
/// (even after a crash) can send each device a stateless reset at once (docs/protocol.md 8.1)
/// instead of waiting for it to send something. Lines `CID-HEX ADDRESS`.
enum SessionTable {
    static let fileName = "udp-sessions"
    /// Most lines read back (the file is the daemon's own; a larger one is cut).
    static let maxEntries = 1 << 20

    static func path(_ dataDir: String) -> String { dataDir + "/" + fileName }

    /// Writes the table through a temporary file and a rename: a crash leaves the old or the new.
    static func write(_ table: [(UInt64, SocketAddress)], dataDir: String) -> Bool {
        var text = ""
        text.reserveCapacity(table.count * 40)
        for (id, address) in table {
            let hex = String(id, radix: 16)
            text += String(repeating: "0", count: 16 - hex.count) + hex + " " + address.description + "\n"
        }
        let target = path(dataDir)
        let temporary = target + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        let bytes = Array(text.utf8)
        let written = bytes.isEmpty ? 0 : Glibc.write(fd, bytes, bytes.count)
        close(fd)
        guard written == bytes.count else {
            unlink(temporary)
            return false
        }
        return rename(temporary, target) == 0
    }

    /// The table the previous run left, or nothing.
    static func read(dataDir: String) -> [(UInt64, SocketAddress)] {
        guard let text = FileSystem.readText(path(dataDir)) else { return [] }
        var out: [(UInt64, SocketAddress)] = []
        for line in text.split(separator: "\n") where out.count < maxEntries {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let id = UInt64(parts[0], radix: 16), id != 0,
                  let address = try? SocketAddress.parse(String(parts[1])) else { continue }
            out.append((id, address))
        }
        return out
    }
}
