// Options shared by the client commands (send, watch, export) and their exit codes.
import Foundation
import InkClient
import InkDaemon
import InkProtocol
import InkUV

/// Exit codes of the client commands (listed by `inkwire --help`).
enum ClientExit {
    static let ok: Int32 = 0
    /// A local failure: unreadable trace, undecodable data, digest mismatch.
    static let failure: Int32 = 1
    static let badArguments: Int32 = 2
    /// No answer from the server within `--timeout`, or the connection was refused.
    static let unreachable: Int32 = 3
    /// The server refused the join (bad or expired token, role not allowed, room full...).
    static let joinRefused: Int32 = 4
    /// The room refused a batch (e.g. a viewer drawing) or another request.
    static let refused: Int32 = 5
    /// The connection was lost or the server ended the session after the join.
    static let connectionLost: Int32 = 6
    /// The daemon did not prove the pinned (or known) key: a rogue daemon, or its key changed.
    static let wrongServerKey: Int32 = 7

    static let help = """
        exit codes of send, watch and export:
          0  done
          1  local failure (unreadable file, bad data, digest mismatch)
          2  bad arguments
          3  server unreachable (no answer within --timeout, connection refused)
          4  join refused (the reason is printed: bad or expired token, role not allowed...)
          5  a batch or request was refused by the room (e.g. a viewer drawing)
          6  connection lost, or the server ended the session
          7  the daemon did not prove its key (--server-key, or the one kept on first use)
        """
}

struct UsageError: Error, CustomStringConvertible {
    var description: String
}

/// `--flag value` and `--flag=value` pairs (every flag takes one value), and `-h`/`--help`.
struct ParsedFlags {
    private var values: [String: String] = [:]
    /// `-h` or `--help` was given: the command prints its help and exits 0.
    private(set) var helpRequested = false

    init(_ arguments: [String], allowed: Set<String>) throws(UsageError) {
        var i = 0
        while i < arguments.count {
            var flag = arguments[i]
            i += 1
            if flag == "-h" || flag == "--help" {
                helpRequested = true
                continue
            }
            var inline: String?
            if flag.hasPrefix("--"), let equals = flag.firstIndex(of: "=") {
                inline = String(flag[flag.index(after: equals)...])
                flag = String(flag[..<equals])
            }
            guard allowed.contains(flag) else { throw UsageError(description: "unknown option \(flag)") }
            if let inline {
                values[flag] = inline
            } else {
                guard i < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
                values[flag] = arguments[i]
                i += 1
            }
        }
    }

    func string(_ flag: String) -> String? { values[flag] }

    func required(_ flag: String) throws(UsageError) -> String {
        guard let v = values[flag], !v.isEmpty else { throw UsageError(description: "\(flag) is required") }
        return v
    }

    /// A positive finite number (seconds, or a speed factor).
    func positive(_ flag: String, default value: Double) throws(UsageError) -> Double {
        guard let text = values[flag] else { return value }
        guard let v = Double(text), v.isFinite, v > 0 else { throw UsageError(description: "\(flag) must be a positive number, not '\(text)'") }
        return v
    }
}

/// `udp://HOST:PORT` or `tcp://HOST:PORT`; HOST is an IPv4 address, `[IPv6]`, or a host name
/// resolved with the system resolver when the command connects (`HostResolver`).
struct ServerURL: CustomStringConvertible {
    enum Scheme: String { case udp, tcp }
    var scheme: Scheme
    /// As given (`classroom-box.local`, `192.0.2.7`, `[::1]`).
    var host: String
    var port: UInt16
    /// The address when HOST is a literal (or `localhost`, as inkwired reads it: 127.0.0.1).
    var literal: SocketAddress?

    init(_ text: String) throws(UsageError) {
        guard let range = text.range(of: "://"), let scheme = Scheme(rawValue: String(text[..<range.lowerBound])) else {
            throw UsageError(description: "--server must be udp://HOST:PORT or tcp://HOST:PORT, not '\(text)'")
        }
        self.scheme = scheme
        let rest = String(text[range.upperBound...])
        if let address = try? SocketAddress.parse(rest) {
            literal = address
            port = address.port
            host = String(rest[..<rest.lastIndex(of: ":")!])
            return
        }
        guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]) else {
            throw UsageError(description: "--server '\(text)': expected HOST:PORT with a port from 0 to 65535")
        }
        let name = String(rest[..<colon])
        guard !name.isEmpty, !name.hasPrefix("["), name.utf8.count <= HostResolver.maximumNameBytes,
              name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == ".") }) else {
            throw UsageError(description: "--server '\(text)': HOST must be an IPv4 address, [IPv6] or a host name")
        }
        host = name
        self.port = port
    }

    /// The addresses to try, in order: the literal, or what the resolver returns for the name.
    func addresses(loop: EventLoop) throws(UVError) -> [SocketAddress] {
        if let literal { return [literal] }
        return try HostResolver.resolve(host, port: port, loop: loop)
    }

    var description: String { "\(scheme.rawValue)://\(host):\(port)" }

    /// `HOST:PORT` as given: the daemon's name in `known-daemons` (a name, not what it resolves to).
    var hostAndPort: String { "\(host):\(port)" }
}

/// What every client command takes.
struct ClientOptions {
    static let flags: Set<String> = ["--server", "--server-key", "--room", "--user", "--role", "--token", "--token-file", "--timeout"]
    static let usage = "--server udp://HOST:PORT|tcp://HOST:PORT [--server-key KEY] --room R [--user NAME] [--role teacher|presenter|viewer] [--token-file FILE | --token T] [--timeout SECONDS]"
    /// The environment variable a token may come from instead of a flag.
    static let tokenEnvironment = "INKWIRE_TOKEN"

    var server: ServerURL
    var room: String
    var user: String
    var role: MemberRole
    var token: String
    /// How long to wait for the join to be answered.
    var timeoutSeconds: Double
    /// `--server-key`: the daemon's public key, pinned (docs/protocol.md 8.4); nil: the key
    /// kept from the first use, or learned now.
    var serverKey: [UInt8]?

    init(_ flags: ParsedFlags, defaultRole: MemberRole, defaultUser: String, environment: [String: String] = [:]) throws(UsageError) {
        server = try ServerURL(try flags.required("--server"))
        room = try flags.required("--room")
        user = flags.string("--user") ?? defaultUser
        guard !user.isEmpty else { throw UsageError(description: "--user must not be empty") }
        switch flags.string("--role") {
        case nil: role = defaultRole
        case "teacher": role = .teacher
        case "presenter": role = .presenter
        case "viewer": role = .viewer
        case let other?: throw UsageError(description: "--role must be teacher, presenter or viewer, not '\(other)'")
        }
        token = try ClientOptions.token(flags, environment: environment)
        timeoutSeconds = try flags.positive("--timeout", default: 5)
        if let text = flags.string("--server-key") {
            guard let key = PublicKeyText.decode(text) else {
                throw UsageError(description: "--server-key must be the daemon's public key (`inkwired --print-public-key`: 43 base64url characters or 64 hex digits), not '\(text)'")
            }
            serverKey = key
        }
    }

    /// The join token: `--token`, else `--token-file` (its first line), else `INKWIRE_TOKEN`,
    /// else none. Each is bounded by the longest token a daemon accepts.
    static func token(_ flags: ParsedFlags, environment: [String: String]) throws(UsageError) -> String {
        let limit = TokenVerifier.maximumTokenBytes
        switch (flags.string("--token"), flags.string("--token-file")) {
        case (_?, _?):
            throw UsageError(description: "--token and --token-file exclude each other")
        case (let text?, nil):
            guard text.utf8.count <= limit else { throw UsageError(description: "--token is longer than \(limit) bytes") }
            return text
        case (nil, let path?):
            guard let bytes = FileSystem.read(path, limit: limit + 2) else {
                throw UsageError(description: "--token-file \(path): cannot read the file (or it is larger than \(limit) bytes)")
            }
            var line = bytes.split(separator: 0x0a, maxSplits: 1, omittingEmptySubsequences: false).first.map(Array.init) ?? []
            if line.last == 0x0d { line.removeLast() }
            guard !line.isEmpty, line.count <= limit, let text = String(validating: line, as: UTF8.self) else {
                throw UsageError(description: "--token-file \(path): the first line must be the token (1 to \(limit) bytes of text)")
            }
            return text
        case (nil, nil):
            guard let text = environment[tokenEnvironment], !text.isEmpty else { return "" }
            guard text.utf8.count <= limit else { throw UsageError(description: "\(tokenEnvironment) is longer than \(limit) bytes") }
            return text
        }
    }

    func configuration() -> ClientConfiguration {
        ClientConfiguration(room: room, user: user, role: role, token: Array(token.utf8), origin: UInt64.random(in: 1...UInt64.max),
                            serverKey: serverKey)
    }
}

func printError(_ command: String, _ text: String) {
    FileHandle.standardError.write(Data("inkwire \(command): \(text)\n".utf8))
}

/// Parses the common flags plus `extra`; prints usage and returns nil on a bad argument.
func parseClientArguments(
    _ command: String, _ arguments: [String], extra: Set<String>, extraUsage: String, defaultRole: MemberRole
) -> (ClientOptions, ParsedFlags)? {
    do {
        let flags = try ParsedFlags(arguments, allowed: ClientOptions.flags.union(extra))
        let defaultUser = ProcessInfo.processInfo.environment["USER"].flatMap { $0.isEmpty ? nil : $0 } ?? "inkwire"
        return (try ClientOptions(flags, defaultRole: defaultRole, defaultUser: defaultUser, environment: ProcessInfo.processInfo.environment), flags)
    } catch {
        printError(command, "\(error)")
        FileHandle.standardError.write(Data("usage: inkwire \(command) \(ClientOptions.usage) \(extraUsage)\n".utf8))
        return nil
    }
}
