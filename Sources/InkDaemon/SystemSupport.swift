import Glibc


/// Wall-clock time, for timestamps that outlive the process (room log, tokens).
enum WallClock {
    static func milliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    static func seconds() -> UInt64 { milliseconds() / 1000 }
}

/// Small file helpers (blocking; used at start, reload and shutdown only).
public enum FileSystem {
    /// Most bytes `read` returns; configuration files and secrets are tiny.
    public static let maximumReadBytes = 1 << 20

    /// The whole file, or nil when it cannot be read or is larger than `limit`.
    public static func read(_ path: String, limit: Int = maximumReadBytes) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Glibc.read(fd, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { return out }
            out.append(contentsOf: chunk[..<count])
            if out.count > limit { return nil }
        }
    }

    public static func readText(_ path: String) -> String? { read(path).map { String(decoding: $0, as: UTF8.self) } }

    /// `mkdir -p` with mode 0700; nil on success, else the reason.
    public static func makeDirectories(_ path: String) -> String? {
        var current = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            current += (current.isEmpty || current.hasSuffix("/") ? "" : "/") + part
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                return "\(current): \(String(cString: strerror(errno)))"
            }
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return "\(path): not a directory" }
        guard access(path, W_OK | X_OK) == 0 else { return "\(path): not writable" }
        return nil
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
