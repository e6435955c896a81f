// The opening handshake of a WebSocket (RFC 6455 section 4), server side: checks an upgrade
// request and writes the 101 answer. Pure: SHA-1 for Sec-WebSocket-Accept comes from the caller
// (the daemon passes OpenSSL's), so this file does no cryptography of its own.

/// Why an upgrade request is refused, with the HTTP status to answer.
public enum WebSocketHandshakeError: Error, Equatable, Sendable, CustomStringConvertible {
    case notGet
    case notUpgrade
    case badVersion(String?)
    case badKey
    /// The page's origin is not the daemon's own (a page of another site opening a socket).
    case foreignOrigin(String?)
    /// The client offered no subprotocol this daemon speaks.
    case noSubprotocol([String])

    public var status: Int {
        switch self {
        case .notGet: 405
        case .badVersion: 426
        case .foreignOrigin: 403
        case .notUpgrade, .badKey, .noSubprotocol: 400
        }
    }

    public var description: String {
        switch self {
        case .notGet: "a WebSocket upgrade must be a GET"
        case .notUpgrade: "not a WebSocket upgrade (Upgrade: websocket and Connection: Upgrade)"
        case .badVersion(let v): "Sec-WebSocket-Version \(v ?? "missing"), this server speaks 13"
        case .badKey: "Sec-WebSocket-Key is not 16 bytes of base64"
        case .foreignOrigin(let o): "origin \(o ?? "missing") is not this daemon's"
        case .noSubprotocol(let offered): "no subprotocol this daemon speaks among \(offered) (it speaks \(WebSocketHandshake.subprotocol))"
        }
    }
}

public enum WebSocketHandshake {
    /// The WebSocket subprotocol (protocol.md 8.5): one stream message per binary WebSocket
    /// message; the protocol's version is in each message's first byte, as on native TCP.
    public static let subprotocol = "inkwire.v1"
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `base64(SHA-1(key + GUID))`.
    public static func accept(key: String, sha1: ([UInt8]) -> [UInt8]) -> String {
        Base64.encode(sha1(Array((key + guid).utf8)))
    }

    /// Checks `head` and returns the 101 response's bytes. `allowedOrigins` are the
    /// `scheme://host[:port]` origins the daemon accepts: its own, as the request's Host names
    /// it (a browser always sends Origin; a request without one is not from a page and is let
    /// through, as RFC 6455 10.2 leaves to the server).
    public static func respond(to head: HTTPRequestHead, allowedOrigins: [String], sha1: ([UInt8]) -> [UInt8]) throws(WebSocketHandshakeError) -> [UInt8] {
        guard head.method == "GET" else { throw .notGet }
        guard head.minorVersion >= 1, head.tokens("upgrade").contains("websocket"), head.tokens("connection").contains("upgrade") else {
            throw .notUpgrade
        }
        guard head.header("sec-websocket-version") == "13" else { throw .badVersion(head.header("sec-websocket-version")) }
        guard let key = head.header("sec-websocket-key"), Base64.decode(key)?.count == 16 else { throw .badKey }
        if let origin = head.header("origin") {
            guard allowedOrigins.contains(origin.lowercased()) else { throw .foreignOrigin(origin) }
        }
        let offered = head.tokens("sec-websocket-protocol")
        guard offered.contains(subprotocol) else { throw .noSubprotocol(offered) }
        let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(accept(key: key, sha1: sha1))\r\nSec-WebSocket-Protocol: \(subprotocol)\r\n\r\n"
        return Array(response.utf8)
    }

    /// The origins a page of this daemon has when `host` (the request's Host header) reached it:
    /// `https://host` and `http://host`, lowercased.
    public static func ownOrigins(host: String?) -> [String] {
        guard let host = host?.lowercased(), !host.isEmpty else { return [] }
        return ["https://\(host)", "http://\(host)"]
    }
}
