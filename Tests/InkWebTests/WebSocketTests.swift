import Foundation
import Testing
@testable import InkWeb

/// SHA-1 for the handshake tests, written out here (tests only; the daemon uses OpenSSL's).
private func sha1(_ message: [UInt8]) -> [UInt8] {
    var h: [UInt32] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0]
    var m = message
    let bits = UInt64(message.count) * 8
    m.append(0x80)
    while m.count % 64 != 56 { m.append(0) }
    for shift in stride(from: 56, through: 0, by: -8) { m.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    for chunk in stride(from: 0, to: m.count, by: 64) {
        var w = [UInt32](repeating: 0, count: 80)
        for i in 0..<16 { w[i] = (0..<4).reduce(0) { $0 << 8 | UInt32(m[chunk + 4 * i + $1]) } }
        for i in 16..<80 { let v = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]; w[i] = v << 1 | v >> 31 }
        var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
        for i in 0..<80 {
            let (f, k): (UInt32, UInt32) = i < 20 ? ((b & c) | (~b & d), 0x5A827999) : i < 40 ? (b ^ c ^ d, 0x6ED9EBA1)
                : i < 60 ? ((b & c) | (b & d) | (c & d), 0x8F1BBCDC) : (b ^ c ^ d, 0xCA62C1D6)
            let t = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
            (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, t)
        }
        h[0] &+= a; h[1] &+= b; h[2] &+= c; h[3] &+= d; h[4] &+= e
    }
    return h.flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> UInt32(24 - 8 * $0)) } }
}

private func head(_ text: String) throws -> HTTPRequestHead {
    let bytes = Array(text.utf8)
    let end = try #require(try HTTPRequestHead.end(in: bytes))
    return try HTTPRequestHead.parse(bytes[..<end])
}

private let upgrade = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:7421\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:7421\r\n"
    + "Sec-WebSocket-Protocol: inkwire.v1\r\n\r\n"

@Test func rfc6455SampleAccept() {
    // RFC 6455 section 1.3's example.
    #expect(WebSocketHandshake.accept(key: "dGhlIHNhbXBsZSBub25jZQ==", sha1: sha1) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
}

@Test func upgradeIsAnsweredWithTheAcceptAndSubprotocol() throws {
    let h = try head(upgrade)
    let origins = WebSocketHandshake.ownOrigins(host: h.header("host"))
    let response = String(decoding: try WebSocketHandshake.respond(to: h, allowedOrigins: origins, sha1: sha1), as: UTF8.self)
    #expect(response.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"))
    #expect(response.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"))
    #expect(response.contains("Sec-WebSocket-Protocol: inkwire.v1\r\n"))
}

@Test func upgradesThatAreRefused() throws {
    let origins = ["http://127.0.0.1:7421", "https://127.0.0.1:7421"]
    let cases: [(String, WebSocketHandshakeError)] = [
        (upgrade.replacingFirst("GET", "POST"), .notGet),
        (upgrade.replacingFirst("Upgrade: websocket\r\n", ""), .notUpgrade),
        (upgrade.replacingFirst("Version: 13", "Version: 8"), .badVersion("8")),
        (upgrade.replacingFirst("dGhlIHNhbXBsZSBub25jZQ==", "c2hvcnQ="), .badKey),
        (upgrade.replacingFirst("Origin: http://127.0.0.1:7421", "Origin: http://evil.example"), .foreignOrigin("http://evil.example")),
        (upgrade.replacingFirst("inkwire.v1", "chat"), .noSubprotocol(["chat"])),
    ]
    for (text, expected) in cases {
        #expect(throws: expected) { try WebSocketHandshake.respond(to: try head(text), allowedOrigins: origins, sha1: sha1) }
    }
}

@Test func requestHeadBounds() throws {
    #expect(try HTTPRequestHead.end(in: Array("GET / HTTP/1.1\r\nHost: x\r\n".utf8)) == nil)
    #expect(throws: HTTPRequestError.tooLarge) { try HTTPRequestHead.end(in: [UInt8](repeating: 65, count: HTTPRequestHead.maxBytes)) }
    let many = "GET / HTTP/1.1\r\n" + String(repeating: "A: b\r\n", count: 65) + "\r\n"
    #expect(throws: HTTPRequestError.tooManyHeaders) { try head(many) }
    #expect(throws: HTTPRequestError.hasBody) { try head("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n") }
    for bad in ["GET  / HTTP/1.1\r\n\r\n", "GET / HTTP/2\r\n\r\n", "GET x HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
                "G(T / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nA: \u{1}\r\n\r\n"] {
        #expect(throws: HTTPRequestError.self) { try head(bad) }
    }
    let ok = try head("GET /room/ma%20th?x=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    #expect(ok.path == "/room/ma%20th" && ok.keepsAlive && ok.minorVersion == 0)
    #expect(percentDecoded("ma%20th") == "ma th" && percentDecoded("%zz") == nil && percentDecoded("%ff") == nil)
}

@Test func base64RoundTripsAndRejectsNonCanonical() {
    for n in 0..<20 {
        let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        #expect(Base64.decode(Base64.encode(bytes)) == bytes)
    }
    #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
    #expect(Base64.decode("Zm9=") == nil && Base64.decode("Zg=a") == nil && Base64.decode("Zh==") == nil && Base64.decode("Zg==") == [0x66])
}

private func clientFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
    WebSocketFrame(fin: fin, opcode: opcode, payload: payload).encoded(mask: (1, 2, 3, 4))
}

private func events(_ ws: inout WebSocketConnection) -> [WebSocketEvent] {
    var out: [WebSocketEvent] = []
    while let e = ws.pollEvent() { out.append(e) }
    return out
}

@Test func binaryMessagesFragmentsAndPings() {
    var ws = WebSocketConnection(role: .server)
    let big = [UInt8](repeating: 7, count: 70_000)
    var bytes = clientFrame(.binary, [1, 2, 3]) + clientFrame(.binary, Array(big[..<100]), fin: false)
    bytes += clientFrame(.ping, [9]) + clientFrame(.continuation, Array(big[100...]))
    // Byte by byte: the decoder takes reads of any size.
    for b in bytes { ws.handleBytes([b]) }
    #expect(events(&ws) == [.message([1, 2, 3]), .message(big)])
    #expect(ws.pollTransmit() == [0x8A, 1, 9])
    ws.send([5, 6])
    #expect(ws.pollTransmit() == [0x82, 2, 5, 6])
}

@Test func violationsCloseWithTheirCode() {
    let cases: [([UInt8], WebSocketCloseCode)] = [
        (WebSocketFrame(opcode: .binary, payload: [1]).encoded(), .protocolError),  // unmasked
        ([0xC2, 0x80, 0, 0, 0, 0], .protocolError),  // RSV1
        ([0x83, 0x80, 0, 0, 0, 0], .protocolError),  // opcode 3
        (clientFrame(.text, Array("hi".utf8)), .unsupportedData),
        (clientFrame(.continuation, [1]), .protocolError),
        (clientFrame(.binary, [1], fin: false) + clientFrame(.binary, [2]), .protocolError),
        (clientFrame(.ping, [UInt8](repeating: 0, count: 126)), .protocolError),
        (clientFrame(.ping, [1], fin: false), .protocolError),
        ([0x82, 0xFE, 0x00, 0x05, 0, 0, 0, 0, 1, 2, 3, 4, 5], .protocolError),  // 16-bit length for 5
        ([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0], .protocolError),  // 64-bit length, top bit
        (clientFrame(.binary, [UInt8](repeating: 0, count: 2000)), .tooBig),
        (clientFrame(.close, [3]), .protocolError),
        (clientFrame(.close, [0x03, 0xED]), .protocolError),  // code 1005 may not be sent
        (clientFrame(.close, [0x03, 0xE8, 0xFF]), .invalidPayload),
    ]
    for (bytes, code) in cases {
        var ws = WebSocketConnection(role: .server, limits: WebSocketLimits(maxMessageBytes: 1024, maxFragments: 4))
        ws.handleBytes(bytes)
        guard case .closed(_, _, let error)? = events(&ws).last else {
            Issue.record("\(bytes.prefix(12)) did not close")
            continue
        }
        #expect(error?.code == code, "\(bytes.prefix(12))")
        let sent = ws.pollTransmit() ?? []
        #expect(sent.first == 0x88 && sent.count >= 4 && UInt16(sent[2]) << 8 | UInt16(sent[3]) == code.rawValue)
        #expect(ws.isClosed)
    }
    var ws = WebSocketConnection(role: .server, limits: WebSocketLimits(maxMessageBytes: 1024, maxFragments: 4))
    ws.handleBytes((0..<5).flatMap { clientFrame($0 == 0 ? .binary : .continuation, [1], fin: false) })
    guard case .closed(_, _, let error)? = events(&ws).last else { Issue.record("fragments"); return }
    #expect(error?.code == .policyViolation)
}

@Test func closingHandshake() {
    var ws = WebSocketConnection(role: .server)
    ws.handleBytes(clientFrame(.close, [0x03, 0xE8] + Array("bye".utf8)))
    #expect(events(&ws) == [.closed(code: 1000, reason: "bye", error: nil)])
    #expect(ws.pollTransmit() == [0x88, 2, 0x03, 0xE8])
    ws.send([1])
    #expect(ws.pollTransmit() == nil)
    // A client sees server frames unmasked and sends masked ones.
    var client = WebSocketConnection(role: .client, mask: { (9, 9, 9, 9) })
    client.handleBytes([0x81, 2, 0x68, 0x69])
    #expect(events(&client) == [.text("hi")])
    client.sendText("a")
    #expect(client.pollTransmit() == [0x81, 0x81, 9, 9, 9, 9, 0x61 ^ 9])
}

extension String {
    fileprivate func replacingFirst(_ a: String, _ b: String) -> String {
        guard let r = range(of: a) else { return self }
        return replacingCharacters(in: r, with: b)
    }
}
