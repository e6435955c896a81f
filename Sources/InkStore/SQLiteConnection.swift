import CSQLite

/// SQLITE_TRANSIENT: SQLite copies bound text and blobs before the bind call returns.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection, used by one thread at a time (opened with SQLITE_OPEN_NOMUTEX).
/// Every C call is bound here once; failures become `StoreError.storage` with SQLite's code.
final class SQLiteConnection {
    /// How long a statement waits for another connection's lock before failing with
    /// SQLITE_BUSY: a connection closing elsewhere checkpoints the WAL under an exclusive lock
    /// for a moment, and a reader or a reopen must wait that out rather than fail.
    static let busyTimeoutMilliseconds: Int32 = 2000

    let handle: OpaquePointer
    let path: String

    init(path: String, readOnly: Bool = false, create: Bool = true) throws(StoreError) {
        self.path = path
        var db: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close_v2(db) }
            throw .storage(code: rc, message: message, context: "opening \(path)")
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, Self.busyTimeoutMilliseconds)
    }

    deinit { sqlite3_close_v2(handle) }

    func failure(_ code: Int32, _ context: String) -> StoreError {
        .storage(code: code, message: String(cString: sqlite3_errmsg(handle)), context: context)
    }

    /// Runs one or more statements that return no rows the caller needs.
    func exec(_ sql: String) throws(StoreError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw failure(rc, sql) }
    }

    /// Runs a single-value query such as `PRAGMA user_version`.
    func scalar(_ sql: String) throws(StoreError) -> Int64 {
        let statement = try prepare(sql)
        defer { statement.reset() }
        guard try statement.step() else { return 0 }
        return statement.int64(0)
    }

    func prepare(_ sql: String) throws(StoreError) -> SQLiteStatement {
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw failure(rc, "preparing \(sql)") }
        return SQLiteStatement(raw, connection: self, sql: sql)
    }
}

/// A prepared statement, kept for reuse; `reset` after each use ends its read transaction.
final class SQLiteStatement {
    private let raw: OpaquePointer
    private unowned let connection: SQLiteConnection
    private let sql: String

    init(_ raw: OpaquePointer, connection: SQLiteConnection, sql: String) {
        self.raw = raw
        self.connection = connection
        self.sql = sql
    }

    deinit { sqlite3_finalize(raw) }

    func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(raw, index, value) }
    func bind(_ index: Int32, _ value: UInt64) { sqlite3_bind_int64(raw, index, Int64(bitPattern: value)) }
    func bind(_ index: Int32, _ value: String) { sqlite3_bind_text(raw, index, value, -1, sqliteTransient) }

    func bind(_ index: Int32, _ bytes: [UInt8]) {
        if bytes.isEmpty {
            sqlite3_bind_zeroblob(raw, index, 0)  // a nil pointer would bind NULL
        } else {
            bytes.withUnsafeBytes { _ = sqlite3_bind_blob(raw, index, $0.baseAddress, Int32($0.count), sqliteTransient) }
        }
    }

    /// Steps once: true when a row is ready, false when done.
    func step() throws(StoreError) -> Bool {
        let rc = sqlite3_step(raw)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let error = connection.failure(rc, sql)
        sqlite3_reset(raw)
        throw error
    }

    /// Steps a statement that returns no rows, then resets it.
    func run() throws(StoreError) {
        defer { reset() }
        _ = try step()
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }
    func uint64(_ column: Int32) -> UInt64 { UInt64(bitPattern: sqlite3_column_int64(raw, column)) }

    func string(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(raw, column) else { return "" }
        return String(cString: text)
    }

    func bytes(_ column: Int32) -> [UInt8] {
        let base = sqlite3_column_blob(raw, column)  // before _bytes, as SQLite asks
        let count = Int(sqlite3_column_bytes(raw, column))
        guard count > 0, let base else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }
}
