import CSQLite
import Glibc

/// Copies of a room log taken with SQLite's online backup API: consistent while the daemon
/// keeps writing (the copy is one read transaction; in WAL mode the writer never waits for it),
/// checked, and made durable before they are named.
public enum RoomLogBackup {
    /// What a room log holds, as reported by `copy` and `inspect`.
    public struct Summary: Sendable, Equatable {
        public var schemaVersion: Int
        public var rooms: Int
        public var batches: Int
        public var snapshots: Int
        public var bytes: Int
    }

    /// Longest the copy waits out another connection's lock (a checkpoint), in total.
    static let busyLimitMs = 10_000

    /// Copies the room log at `source` into a new file `destination` (refused if it exists).
    public static func copy(databaseAt source: String, to destination: String) throws(StoreError) -> Summary {
        guard access(source, F_OK) == 0 else {
            throw .storage(code: SQLITE_CANTOPEN, message: "no room log there", context: "reading \(source)")
        }
        // Read-write, not read-only: a read-only connection cannot set up the WAL index when
        // the daemon is stopped. It writes nothing; as root, SQLite gives any -wal or -shm
        // file it creates the owner of the database.
        let db = try SQLiteConnection(path: source, create: false)
        try db.exec("PRAGMA busy_timeout = \(busyLimitMs)")
        _ = try summary(db)  // fails early on a file that is not a room log
        return try copy(from: db, to: destination)
    }

    /// Copies an open database into a new file `destination`: written to `destination.partial`,
    /// switched out of WAL mode (one self-contained file), integrity-checked, fsynced, renamed.
    static func copy(from db: SQLiteConnection, to destination: String) throws(StoreError) -> Summary {
        guard access(destination, F_OK) != 0 else {
            throw .storage(code: SQLITE_CANTOPEN, message: "the file exists", context: "writing \(destination)")
        }
        let partial = destination + ".partial"
        unlink(partial)
        do throws(StoreError) {
            let copy = try SQLiteConnection(path: partial)
            guard let backup = sqlite3_backup_init(copy.handle, "main", db.handle, "main") else {
                throw copy.failure(sqlite3_errcode(copy.handle), "starting the backup into \(partial)")
            }
            var waitedMs = 0
            var rc: Int32
            repeat {
                rc = sqlite3_backup_step(backup, -1)
                if rc == SQLITE_BUSY || rc == SQLITE_LOCKED {
                    guard waitedMs < busyLimitMs else { break }
                    usleep(20_000)
                    waitedMs += 20
                }
            } while rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED
            let finished = sqlite3_backup_finish(backup)
            guard rc == SQLITE_DONE, finished == SQLITE_OK else {
                throw copy.failure(rc == SQLITE_DONE ? finished : rc, "copying into \(partial)")
            }
            try copy.exec("PRAGMA journal_mode = DELETE")
            // Every stroke of every room: as private as the room log, whatever the umask.
            guard chmod(partial, 0o600) == 0 else { throw systemFailure("chmod \(partial)") }
            try check(copy, path: partial)
            let summary = try summary(copy)
            try syncFile(partial)
            guard rename(partial, destination) == 0 else { throw systemFailure("renaming \(partial) to \(destination)") }
            try syncDirectory(of: destination)
            return summary
        } catch {
            unlink(partial)
            throw error
        }
    }

    /// Checks a backup without changing it: a room log (application id, tables), intact
    /// (`PRAGMA integrity_check`), and a schema this release can read.
    public static func inspect(_ path: String) throws(StoreError) -> Summary {
        guard access(path, R_OK) == 0 else { throw systemFailure("reading \(path)") }
        let db = try SQLiteConnection(path: path, readOnly: true)
        try check(db, path: path)
        let found = try summary(db)
        guard found.schemaVersion <= SQLiteSchema.currentVersion else {
            throw .schemaTooNew(found: found.schemaVersion, supported: SQLiteSchema.currentVersion)
        }
        return found
    }

    /// Puts the backup at `backup` in place of the room log at `database` (the daemon stopped).
    /// The current room log, if any, is first copied to `previous`. The restored file gets the
    /// owner of its directory (when run as root), so the service can open it.
    public static func restore(from backup: String, to database: String, keepingPreviousAs previous: String) throws(StoreError) -> Summary {
        let summary = try inspect(backup)
        if access(database, F_OK) == 0 {
            // Through SQLite, so a WAL left by a crash is part of the copy; closing the last
            // connection then checkpoints and removes the WAL, which must not outlive its database.
            _ = try copy(databaseAt: database, to: previous)
        }
        let restoring = database + ".restoring"
        unlink(restoring)
        do throws(StoreError) {
            let source = try SQLiteConnection(path: backup, readOnly: true)
            _ = try copy(from: source, to: restoring)
            for suffix in ["-wal", "-shm", "-journal"] { unlink(database + suffix) }
            var directory = stat()
            let parent = parentDirectory(of: database)
            if geteuid() == 0, stat(parent, &directory) == 0 {
                guard chown(restoring, directory.st_uid, directory.st_gid) == 0 else { throw systemFailure("chown \(restoring)") }
            }
            guard rename(restoring, database) == 0 else { throw systemFailure("renaming \(restoring) to \(database)") }
            try syncDirectory(of: database)
        } catch {
            unlink(restoring)
            throw error
        }
        return summary
    }

    /// `rooms-schema1-20261201T221500Z.sqlite`.
    static func migrationBackupName(fromVersion: Int, nowMs: UInt64) -> String {
        "rooms-schema\(fromVersion)-\(utcStamp(nowMs)).sqlite"
    }

    /// `20261201T221500Z`.
    public static func utcStamp(_ ms: UInt64) -> String {
        var seconds = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }

    static func wallClockMs() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    /// `mkdir` with mode 0700 (an existing directory is fine).
    static func makeDirectory(_ path: String) throws(StoreError) {
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else { throw systemFailure("creating \(path)") }
    }

    private static func check(_ db: SQLiteConnection, path: String) throws(StoreError) {
        let statement = try db.prepare("PRAGMA integrity_check")
        defer { statement.reset() }
        let verdict = try statement.step() ? statement.string(0) : ""
        guard verdict == "ok" else {
            throw .storage(code: SQLITE_CORRUPT, message: "integrity check: \(verdict.prefix(200))", context: "checking \(path)")
        }
    }

    private static func summary(_ db: SQLiteConnection) throws(StoreError) -> Summary {
        let application = Int32(truncatingIfNeeded: try db.scalar("PRAGMA application_id"))
        let hasRooms = try db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('rooms', 'batches', 'snapshots')") == 3
        guard hasRooms, application == SQLiteSchema.applicationID || application == 0 else {
            throw .storage(code: SQLITE_NOTADB, message: "not an Inkwire room log", context: "reading \(db.path)")
        }
        return Summary(schemaVersion: try SQLiteSchema.version(db),
                       rooms: Int(try db.scalar("SELECT count(*) FROM rooms")),
                       batches: Int(try db.scalar("SELECT count(*) FROM batches")),
                       snapshots: Int(try db.scalar("SELECT count(*) FROM snapshots")),
                       bytes: Int(try db.scalar("PRAGMA page_count") * (try db.scalar("PRAGMA page_size"))))
    }

    private static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func syncFile(_ path: String) throws(StoreError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw systemFailure("opening \(path)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw systemFailure("fsync \(path)") }
    }

    private static func syncDirectory(of path: String) throws(StoreError) { try syncFile(parentDirectory(of: path)) }

    private static func systemFailure(_ context: String) -> StoreError {
        .storage(code: SQLITE_IOERR, message: String(cString: strerror(errno)), context: context)
    }
}
