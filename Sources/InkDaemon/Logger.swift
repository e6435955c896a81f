import Glibc

/// Severity of a log event, mapped onto syslog priorities for journald.
public enum LogLevel: Int, Comparable, CaseIterable, Sendable, CustomStringConvertible {
    case debug, info, notice, warning, error

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    /// The name used in log lines and accepted by `--log-level`.
    public var description: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        }
    }

    /// syslog priority (the `<N>` prefix journald reads).
    public var syslogPriority: Int {
        switch self {
        case .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        }
    }

    /// Parses a `--log-level` value (`warn` is accepted for `warning`); nil when unknown.
    public init?(parsing text: String) {
        switch text.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "notice": self = .notice
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }

    /// The accepted `--log-level` values, for help and error messages.
    public static let acceptedNames = "debug, info, notice, warning, error"
}

/// Writes one logfmt line per event: `level=info msg="listening" udp=127.0.0.1:9000`.
///
/// Values are quoted when they contain spaces, `=`, quotes or control characters (escaped as
/// `\"`, `\\`, `\n`, `\t`, `\r`, `\u{..}`); `msg` is always quoted. Keys are reduced to
/// `[A-Za-z0-9_.-]`. When stderr is the journal (`JOURNAL_STREAM`), each line starts with its
/// syslog priority (`<6>`) and no timestamp (journald adds one); otherwise it starts with
/// `time=` in UTC. Single-threaded, like the loop that calls it.
public final class Logger {
    /// Events below this level are dropped (changeable on reload).
    public var level: LogLevel
    /// Whether lines carry the `<N>` syslog prefix.
    public let journal: Bool
    /// Whether lines start with a `time=` field.
    public let timestamps: Bool
    private let sink: (String) -> Void

    /// Longest line written; longer values are cut so one event stays one write.
    public static let maximumLineBytes = 16 * 1024

    /// A logger writing to stderr; `journal` defaults to whether stderr is the journal.
    public convenience init(level: LogLevel = .info, environment: [String: String]) {
        let journal = Logger.stderrIsJournal(environment: environment)
        self.init(level: level, journal: journal, timestamps: !journal, sink: Logger.writeToStandardError)
    }

    /// A logger writing complete lines (with the trailing newline) to `sink`.
    public init(level: LogLevel = .info, journal: Bool = false, timestamps: Bool = false, sink: @escaping (String) -> Void) {
        self.level = level
        self.journal = journal
        self.timestamps = timestamps
        self.sink = sink
    }

    public func isEnabled(_ level: LogLevel) -> Bool { level >= self.level }

    /// Logs one event with ordered fields.
    public func log(_ level: LogLevel, _ message: String, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        guard isEnabled(level) else { return }
        sink(format(level, message, fields))
    }

    public func debug(_ message: String, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        log(.debug, message, fields)
    }
    public func info(_ message: String, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        log(.info, message, fields)
    }
    public func notice(_ message: String, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        log(.notice, message, fields)
    }
    public func warning(_ message: String, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        log(.warning, message, fields)
    }
    public func error(_ message: String, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        log(.error, message, fields)
    }

    /// The line for one event, newline included.
    func format(_ level: LogLevel, _ message: String, _ fields: KeyValuePairs<String, any CustomStringConvertible>) -> String {
        var line = ""
        if journal { line += "<\(level.syslogPriority)>" }
        if timestamps { line += "time=\(Logger.utcTimestamp()) " }
        line += "level=\(level) msg="
        Logger.appendQuoted(message, to: &line)
        for (key, value) in fields {
            line += " "
            line += Logger.sanitizedKey(key)
            line += "="
            Logger.appendValue(value.description, to: &line)
        }
        if line.utf8.count > Logger.maximumLineBytes {
            line = String(decoding: line.utf8.prefix(Logger.maximumLineBytes - 4), as: UTF8.self) + "..."
        }
        line += "\n"
        return line
    }

    static func sanitizedKey(_ key: String) -> String {
        if key.isEmpty { return "_" }
        return String(String.UnicodeScalarView(key.unicodeScalars.map { scalar in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "_", ".", "-": scalar
            default: "_"
            }
        }))
    }

    static func appendValue(_ value: String, to line: inout String) {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { scalar in
            scalar == " " || scalar == "=" || scalar == "\"" || scalar == "\\" || scalar.value < 0x20 || scalar.value == 0x7f
        }
        if needsQuotes { appendQuoted(value, to: &line) } else { line += value }
    }

    static func appendQuoted(_ value: String, to line: inout String) {
        line += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": line += "\\\""
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7f:
                line += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: line.unicodeScalars.append(scalar)
            }
        }
        line += "\""
    }

    /// Whether fd 2 is the stream journald gave us: `JOURNAL_STREAM=DEV:INODE` must match
    /// fstat(2), so a child whose stderr was redirected does not prefix priorities.
    public static func stderrIsJournal(environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// `2026-11-29T17:05:03.123Z`.
    static func utcTimestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }

    /// One write(2) per line, so lines from one process never interleave mid-line.
    static func writeToStandardError(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}
