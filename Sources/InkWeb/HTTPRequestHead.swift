// One HTTP/1.1 request head (request line and headers), parsed from bytes with every size
// bounded. Enough of RFC 9112 for the daemon's web listener: GET and HEAD of its own pages and
// the WebSocket upgrade; no bodies, no chunked encoding, no folded header lines.

/// Why bytes are not a request head this listener serves. Each maps to one HTTP status.
public enum HTTPRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The head passed `HTTPRequestHead.maxBytes` before its blank line (431).
    case tooLarge
    /// More than `HTTPRequestHead.maxHeaders` header lines (431).
    case tooManyHeaders
    /// Not `METHOD SP TARGET SP HTTP/1.x`, a bad header line, or a byte no head may hold (400).
    case malformed(String)
    /// A request with a body (Content-Length above 0, or Transfer-Encoding): not served (400).
    case hasBody

    public var status: Int {
        switch self {
        case .tooLarge, .tooManyHeaders: 431
        case .malformed, .hasBody: 400
        }
    }

    public var description: String {
        switch self {
        case .tooLarge: "request head larger than \(HTTPRequestHead.maxBytes) bytes"
        case .tooManyHeaders: "more than \(HTTPRequestHead.maxHeaders) header lines"
        case .malformed(let why): "malformed request: \(why)"
        case .hasBody: "requests with a body are not served"
        }
    }
}

public struct HTTPRequestHead: Sendable, Equatable {
    /// Largest head accepted, request line and headers, in bytes.
    public static let maxBytes = 8 * 1024
    /// Most header lines accepted.
    public static let maxHeaders = 64

    public var method: String
    /// The request target as sent (`/room/maths?x`), percent-escapes kept.
    public var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    /// Header lines in order, names lowercased, values with surrounding blanks removed.
    public var headers: [(name: String, value: String)]

    public static func == (a: HTTPRequestHead, b: HTTPRequestHead) -> Bool {
        a.method == b.method && a.target == b.target && a.minorVersion == b.minorVersion
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }

    /// The target's path, before any `?` or `#`.
    public var path: String { String(target.prefix { $0 != "?" && $0 != "#" }) }

    /// The value of the first header `name` (lowercase), if any.
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The comma-separated tokens of every `name` header, lowercased (`Connection: keep-alive, Upgrade`).
    public func tokens(_ name: String) -> [String] {
        headers.filter { $0.name == name }.flatMap { $0.value.split(separator: ",") }
            .map { $0.trimmingBlanks().lowercased() }.filter { !$0.isEmpty }
    }

    /// Whether the connection stays open after the response (HTTP/1.1 unless `close`).
    public var keepsAlive: Bool {
        let connection = tokens("connection")
        return minorVersion >= 1 ? !connection.contains("close") : connection.contains("keep-alive")
    }

    /// Where the head ends in `bytes`: the index just past its blank line, or nil while it is
    /// incomplete. Throws once `bytes` hold more than `maxBytes` without one.
    public static func end(in bytes: [UInt8]) throws(HTTPRequestError) -> Int? {
        var index = 0
        let limit = min(bytes.count, maxBytes)
        while index < limit {
            if bytes[index] == 10 {
                if index >= 1 && bytes[index - 1] == 10 { return index + 1 }
                if index >= 3 && bytes[index - 1] == 13 && bytes[index - 2] == 10 { return index + 1 }
                if index >= 2 && bytes[index - 1] == 13 && bytes[index - 2] == 13 { return index + 1 }
            }
            index += 1
        }
        if bytes.count >= maxBytes { throw .tooLarge }
        return nil
    }

    /// Parses a complete head (as `end(in:)` delimits it).
    public static func parse(_ bytes: ArraySlice<UInt8>) throws(HTTPRequestError) -> HTTPRequestHead {
        guard bytes.count <= maxBytes else { throw .tooLarge }
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        for index in bytes.indices where bytes[index] == 10 {
            var line = bytes[start..<index]
            if line.last == 13 { line = line.dropLast() }
            lines.append(line)
            start = index + 1
        }
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard let requestLine = lines.first else { throw .malformed("empty request") }
        guard lines.count - 1 <= maxHeaders else { throw .tooManyHeaders }
        let parts = requestLine.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("request line is not METHOD TARGET VERSION") }
        guard let method = token(parts[0]), !method.isEmpty else { throw .malformed("method") }
        guard let target = visible(parts[1]), target.hasPrefix("/") || target == "*" else { throw .malformed("target") }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else { throw .malformed("version \(version)") }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 58) else { throw .malformed("header line without a colon") }
            guard let name = token(line[line.startIndex..<colon]), !name.isEmpty else { throw .malformed("header name") }
            let rawValue = line[(colon + 1)...]
            // Field values: visible ASCII, blanks and obs-text; never control bytes.
            guard rawValue.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else { throw .malformed("control byte in \(name)") }
            headers.append((name.lowercased(), String(decoding: rawValue, as: UTF8.self).trimmingBlanks()))
        }
        let head = HTTPRequestHead(method: method, target: target, minorVersion: version == "HTTP/1.1" ? 1 : 0, headers: headers)
        if head.header("transfer-encoding") != nil { throw .hasBody }
        if let length = head.header("content-length"), length != "0" { throw .hasBody }
        return head
    }

    /// RFC 9110 token characters only.
    private static func token(_ bytes: ArraySlice<UInt8>) -> String? {
        let allowed: (UInt8) -> Bool = { b in
            (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
        guard bytes.allSatisfy(allowed) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Visible ASCII (a request target).
    private static func visible(_ bytes: ArraySlice<UInt8>) -> String? {
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 > 32 && $0 < 127 }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension StringProtocol {
    func trimmingBlanks() -> String {
        var scalars = Substring(self).unicodeScalars[...]
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }
}

/// Percent-decoding of a path segment (`/room/ma%20th` -> `ma th`); nil for a bad escape or
/// bytes that are not UTF-8.
public func percentDecoded(_ text: Substring) -> String? {
    var bytes: [UInt8] = []
    var iterator = Array(text.utf8)[...]
    while let b = iterator.popFirst() {
        if b == 37 {
            guard let high = iterator.popFirst(), let low = iterator.popFirst(),
                  let h = hexValue(high), let l = hexValue(low) else { return nil }
            bytes.append(h << 4 | l)
        } else {
            bytes.append(b)
        }
    }
    return String(validating: bytes, as: UTF8.self)
}

private func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case 48...57: b - 48
    case 65...70: b - 55
    case 97...102: b - 87
    default: nil
    }
}
