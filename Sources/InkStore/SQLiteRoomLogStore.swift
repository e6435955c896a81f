/// The daemon's `RoomLogStore`: one SQLite database in WAL mode.
///
/// Two connections: the writer thread's (see `WriterThreadPipe`) and the caller's, which only
/// reads. `synchronous=FULL` for `always` and `batch`: in WAL mode `NORMAL` syncs the WAL only
/// at checkpoints, so a commit that returned can still vanish in a power cut, and the daemon
/// would have acknowledged a batch it then loses. `off` uses `synchronous=OFF`: commits reach
/// the OS (they survive `kill -9`), not necessarily the disk.
public final class SQLiteRoomLogStore: LogFrontedStore {
    public struct Options: Sendable {
        public var durability: Durability = .batch
        /// Group commit: at most one commit per interval (`batch`, `off`).
        public var commitInterval: Duration = .milliseconds(2)
        /// Retention of rooms that `append` creates.
        public var defaultRetention: Retention = .board
        public var limits = StoreLimits()
        /// How long a connection waits on a lock held by another process (e.g. a backup).
        public var busyTimeoutMs: Int32 = 5000
        /// Called on the writer thread after each successful commit: wake the loop, which then
        /// calls `pollDurable()`. Must not call into the store.
        public var onDurable: (@Sendable () -> Void)?
        /// Test hook: caps the database at this many pages (SQLITE_FULL beyond), as a small disk would.
        var maxPageCount: Int?
        /// Where the copy taken before a schema migration goes (nil: `backups` beside the database).
        public var migrationBackupDirectory: String?
        /// Recorded in `schema_history` by a migration: who applied it (`inkwired 0.2.0`).
        public var release = "inkwire"

        public init() {}
    }

    /// The database file's name inside the daemon's `--data-dir`.
    public static let fileName = "rooms.sqlite"
    /// WAL checkpoint threshold (pages) and the size the WAL file is truncated back to.
    static let walAutoCheckpointPages = 1000
    static let walSizeLimitBytes = 8 * 1024 * 1024

    public let path: String
    private let pipe: WriterThreadPipe
    /// The schema migration this open ran (nil: the database was current or new).
    public let migration: SchemaMigration?

    /// `backups`, beside the database: where the copy before a migration goes by default.
    public static func defaultBackupDirectory(forDatabaseAt path: String) -> String {
        let parent = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return (parent.isEmpty && !path.hasPrefix("/") ? "." : parent) + "/backups"
    }

    /// Opens (creating if needed) the database at `path` and reloads every room.
    public init(path: String, options: Options = Options()) throws(StoreError) {
        self.path = path
        let writeDB = try SQLiteConnection(path: path)
        let synchronous = options.durability == .off ? "OFF" : "FULL"
        try writeDB.exec("""
            PRAGMA busy_timeout = \(options.busyTimeoutMs);
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = \(synchronous);
            PRAGMA wal_autocheckpoint = \(Self.walAutoCheckpointPages);
            PRAGMA journal_size_limit = \(Self.walSizeLimitBytes);
            PRAGMA foreign_keys = OFF;
            """)
        guard try Self.journalMode(writeDB) == "wal" else {
            throw .storage(code: 1, message: "WAL mode unavailable", context: "opening \(path)")
        }
        if let pages = options.maxPageCount { try writeDB.exec("PRAGMA max_page_count = \(pages)") }
        migration = try SQLiteSchema.migrate(writeDB, backupDirectory: options.migrationBackupDirectory ?? Self.defaultBackupDirectory(forDatabaseAt: path),
                                             appliedBy: options.release, nowMs: RoomLogBackup.wallClockMs())
        let readDB = try SQLiteConnection(path: path)
        try readDB.exec("PRAGMA busy_timeout = \(options.busyTimeoutMs); PRAGMA query_only = 1;")
        let reader = try SQLiteLogReader(db: readDB)
        let writer = try SQLiteLogWriter(db: writeDB)
        let pipe = WriterThreadPipe(writer: writer, durability: options.durability, interval: options.commitInterval, onDurable: options.onDurable)
        self.pipe = pipe
        let front: LogFront
        do {
            front = try LogFront(reader: reader, pipe: pipe, limits: options.limits, defaultRetention: options.defaultRetention)
        } catch {
            pipe.close()
            throw error
        }
        super.init(front: front)
    }

    deinit { front.close() }

    private static func journalMode(_ db: SQLiteConnection) throws(StoreError) -> String {
        let statement = try db.prepare("PRAGMA journal_mode")
        defer { statement.reset() }
        return try statement.step() ? statement.string(0).lowercased() : ""
    }

}
