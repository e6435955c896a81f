import Foundation
import Glibc
import InkCodec
import InkCrypto
import InkProtocol
import InkWeb
import Testing

/// A WebSocket client on a blocking loopback socket, as a hostile or plain program would be.
/// `send` speaks the sealed stream a page speaks (docs/protocol.md 4.6): the first message is
/// the join, in the handshake to `serverKey` (nil: ask the daemon for its key first).
final class RawWebSocket {
    let fd: Int32
    private var socket = WebSocketConnection(role: .client, limits: WebSocketLimits(maxMessageBytes: 8 << 20), mask: { (1, 2, 3, 4) })
    let serverKey: [UInt8]?
    private(set) var stream: SealedStreamSession?
    private(set) var streamError: SealedStreamError?
    /// Stream messages that were not session messages of the sealed stream (read unsealed).
    private(set) var unsealed: [[UInt8]] = []
    private(set) var messages: [ServerMessage] = []
    private(set) var closeCode: UInt16?
    private(set) var ended = false
    /// The HTTP status of the upgrade answer.
    private(set) var status = 0

    init(port: UInt16, serverKey: [UInt8]?, origin: String? = nil, subprotocol: String = "inkwire.v1") throws {
        self.serverKey = serverKey
        fd = try connectLoopback(port: port, type: SOCK_STREAM)
        var request = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: \(subprotocol)\r\n"
        if let origin { request += "Origin: \(origin)\r\n" }
        sendRaw(Array((request + "\r\n").utf8))
        var head: [UInt8] = []
        let deadline = monotonicMicroseconds() + 5_000_000
        while monotonicMicroseconds() < deadline {
            let chunk = read(limitMicroseconds: 200_000)
            if chunk == nil { break }
            head += chunk!
            if let end = (try? HTTPRequestHead.end(in: head)) ?? nil {
                status = Int(String(decoding: head[9..<12], as: UTF8.self)) ?? 0
                socket.handleBytes(Array(head[end...]))
                drain()
                return
            }
        }
    }

    deinit { close(fd) }

    func sendRaw(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    private var now: Instant { Instant(microseconds: monotonicMicroseconds()) }

    func send(_ message: ClientMessage) { sendSealed(SessionMessageCodec.encode(message)) }

    /// Any bytes as one sealed session message (the first: as the handshake's join).
    func sendSealed(_ bytes: [UInt8]) {
        if let stream {
            stream.send(bytes, now: now)
        } else {
            stream = SealedStreamSession(serverKey: serverKey, join: bytes, crypto: OpenSSLCrypto.shared)
        }
        flushStream()
    }

    /// Any bytes as one binary WebSocket message, unsealed (a protocol 1 page, a forgery).
    func sendMessage(_ bytes: [UInt8]) {
        socket.send(bytes)
        if let out = socket.pollTransmit() { sendRaw(out) }
    }

    private func flushStream() {
        while let m = stream?.pollMessage() { sendMessage(m) }
    }

    /// Reads until `done` or the limit; true if `done` became true.
    @discardableResult
    func pump(limitMicroseconds: UInt64 = 3_000_000, until done: () -> Bool) -> Bool {
        let deadline = monotonicMicroseconds() + limitMicroseconds
        while !done() {
            guard !ended, monotonicMicroseconds() < deadline, let bytes = read(limitMicroseconds: 50_000) else { return done() }
            socket.handleBytes(bytes)
            drain()
        }
        return true
    }

    private func drain() {
        while let event = socket.pollEvent() {
            switch event {
            case .message(let bytes):
                guard let stream, streamError == nil else {
                    unsealed.append(bytes)
                    if let m = try? SessionMessageCodec.decodeServer(bytes) { messages.append(m) }
                    continue
                }
                do { try stream.handleMessage(bytes, now: now) } catch {
                    streamError = error
                    unsealed.append(bytes)
                    continue
                }
                while let event = stream.pollEvent() {
                    if case .delivered(let m) = event, let message = try? SessionMessageCodec.decodeServer(m) { messages.append(message) }
                }
                flushStream()
            case .closed(let code, _, _):
                closeCode = code
            case .text, .pong:
                break
            }
        }
        if let out = socket.pollTransmit() { sendRaw(out) }
    }

    /// nil once the peer closed; [] when nothing came within the limit.
    private func read(limitMicroseconds: UInt64) -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(limitMicroseconds / 1000)) > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 {
            ended = true
            return nil
        }
        return Array(buffer[..<n])
    }
}

/// Bad input on the web port closes that connection only, with a log line; everyone else goes on.
@Suite struct WebHostileTests {
    struct Web {
        let daemon: DaemonProcess
        let port: UInt16
        /// The daemon's public key (the ready line's), which the clients pin.
        let key: [UInt8]
        func socket(origin: String? = nil, subprotocol: String = "inkwire.v1", pinning: [UInt8]? = nil) throws -> RawWebSocket {
            try RawWebSocket(port: port, serverKey: pinning ?? key, origin: origin, subprotocol: subprotocol)
        }
    }

    static func start(_ tag: String, extra: [String] = []) throws -> Web {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--web", "127.0.0.1:0"] + extra, tag: tag)
        let fields = try daemon.ready()
        return Web(daemon: daemon, port: DaemonProcess.port(fields["web"])!, key: try #require(PublicKeyText.decode(fields["public_key"] ?? "")))
    }

    static func joined(_ ws: RawWebSocket) -> Bool {
        ws.pump { ws.messages.contains { if case .joinAccepted = $0 { true } else { false } } }
    }

    /// A joined page-like client that keeps working while others misbehave.
    static func joinedBystander(_ web: Web, room: String) throws -> RawWebSocket {
        let ws = try web.socket()
        ws.send(.join(JoinRequest(room: room, user: "bystander", role: .presenter, origin: 99)))
        #expect(joined(ws))
        return ws
    }

    static func stillServes(_ ws: RawWebSocket, originSeq: UInt64) -> Bool {
        var state = BinaryCodecState()
        let batch = Batch(author: AuthorID(0), commands: [TimedCommand(timeMs: 0, command: .point(StrokePoint(stroke: StrokeID(UInt32(originSeq)), phase: .start, x: 1, y: 2)))])
        ws.send(.batch(originSeq: originSeq, payload: try! BinaryBatchCodec.encode(batch, state: &state)))
        return ws.pump { ws.messages.contains { if case .batchAck(originSeq, _) = $0 { true } else { false } } }
    }

    @Test func malformedFramesCloseThatConnectionOnly() throws {
        let web = try Self.start("web-bad-frames")
        let bystander = try Self.joinedBystander(web, room: "h")
        // Unmasked, reserved bits, a text message, an unknown opcode, a 2^63 length.
        let bad: [([UInt8], UInt16)] = [
            (WebSocketFrame(opcode: .binary, payload: [1, 2]).encoded(), 1002),
            ([0xF2, 0x80, 1, 2, 3, 4], 1002),
            (WebSocketFrame(opcode: .text, payload: Array("hello".utf8)).encoded(mask: (1, 1, 1, 1)), 1003),
            ([0x8B, 0x80, 1, 2, 3, 4], 1002),
            ([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4], 1002),
        ]
        for (bytes, code) in bad {
            let ws = try web.socket()
            #expect(ws.status == 101)
            ws.sendRaw(bytes)
            #expect(ws.pump { ws.closeCode != nil }, "no close frame for \(bytes.prefix(4))")
            #expect(ws.closeCode == code)
            #expect(ws.pump { ws.ended }, "the daemon did not close the connection")
        }
        #expect(web.daemon.waitForLine(containing: "web socket closed: protocol error") != nil)
        #expect(Self.stillServes(bystander, originSeq: 1))
    }

    @Test func oversizeMessagesAndHeadsAreRefused() throws {
        let web = try Self.start("web-oversize", extra: ["--max-frame", "4096"])
        let bystander = try Self.joinedBystander(web, room: "h")
        let ws = try web.socket()
        ws.sendRaw(WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 0, count: 5000)).encoded(mask: (9, 9, 9, 9)))
        #expect(ws.pump { ws.closeCode != nil } && ws.closeCode == 1009)
        // The same bytes in 100-byte fragments: the message bound holds across fragments.
        let fragmented = try web.socket()
        for i in 0..<50 {
            fragmented.sendRaw(WebSocketFrame(fin: false, opcode: i == 0 ? .binary : .continuation, payload: [UInt8](repeating: 7, count: 100)).encoded(mask: (1, 2, 3, 4)))
        }
        #expect(fragmented.pump { fragmented.closeCode != nil } && fragmented.closeCode == 1009)
        // A request head past 8 KiB gets 431 and a close.
        let fd = try connectLoopback(port: web.port, type: SOCK_STREAM)
        defer { close(fd) }
        let head = Array(("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n").utf8)
        _ = head.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&pfd, 1, 3000)
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(n > 0 && String(decoding: buffer[..<max(0, n)], as: UTF8.self).hasPrefix("HTTP/1.1 431"))
        #expect(web.daemon.waitForLine(containing: "web request refused") != nil)
        #expect(Self.stillServes(bystander, originSeq: 1))
    }

    @Test func foreignOriginsAndSubprotocolsAreRefused() throws {
        let web = try Self.start("web-origin", extra: ["--web-origin", "https://board.school.example"])
        defer { withExtendedLifetime(web) {} }
        #expect(try web.socket(origin: "http://evil.example").status == 403)
        #expect(try web.socket(subprotocol: "chat").status == 400)
        #expect(try web.socket(origin: "http://127.0.0.1:\(web.port)").status == 101)
        #expect(try web.socket(origin: "https://board.school.example").status == 101)
    }

    @Test func floodsCloseThatConnectionOnly() throws {
        let web = try Self.start("web-flood", extra: ["--max-web-connections", "6"])
        let bystander = try Self.joinedBystander(web, room: "h")
        // A ping flood costs one pong at a time: the connection stays usable.
        let pinger = try web.socket()
        pinger.sendRaw((0..<5000).flatMap { _ in WebSocketFrame(opcode: .ping, payload: [1, 2, 3]).encoded(mask: (5, 5, 5, 5)) })
        pinger.send(.join(JoinRequest(room: "h", user: "pinger", role: .viewer, origin: 7)))
        #expect(Self.joined(pinger))
        // A flood of malformed messages: errors, then the daemon ends that session.
        let flooder = try web.socket()
        flooder.send(.join(JoinRequest(room: "h", user: "flooder", role: .presenter, origin: 8)))
        #expect(Self.joined(flooder))
        for _ in 0..<200 { flooder.sendSealed([1, 2, 200, 1]) }
        #expect(flooder.pump(limitMicroseconds: 5_000_000) { flooder.messages.contains { if case .goingAway(.tooManyErrors, _) = $0 { true } else { false } } })
        #expect(flooder.pump { flooder.ended })
        // A connection flood: past --max-web-connections, new ones are closed at once.
        var extra: [Int32] = []
        for _ in 0..<8 { extra.append(try connectLoopback(port: web.port, type: SOCK_STREAM)) }
        #expect(web.daemon.waitForLine(containing: "web connection refused: too many") != nil)
        for fd in extra { close(fd) }
        #expect(Self.stillServes(bystander, originSeq: 1))
    }

    @Test func silentReadersAreClosed() throws {
        let web = try Self.start("web-silent", extra: ["--web-idle-ms", "400"])
        let bystander = try Self.joinedBystander(web, room: "h")
        // A reader that neither reads nor answers pings: pinged after 0.8 s of silence, closed
        // 0.4 s later. The bystander reads (and answers the pings) all along.
        let silent = try web.socket()
        silent.send(.join(JoinRequest(room: "h", user: "silent", role: .viewer, origin: 9)))
        bystander.pump(limitMicroseconds: 10_000_000) { web.daemon.log.contains("web socket closed: silent") }
        #expect(web.daemon.waitForLine(containing: "web socket closed: silent") != nil)
        _ = silent
        #expect(Self.stillServes(bystander, originSeq: 1))
    }

    /// The web port speaks only sealed streams, exactly as native TCP: a protocol 1 page is
    /// refused with the reason, a key request gets the key, a page pinning another key gets a
    /// notice, and a message that does not open ends that socket only.
    @Test func sealedStreamsOnly() throws {
        let web = try Self.start("web-sealed")
        let bystander = try Self.joinedBystander(web, room: "h")

        let old = try web.socket()
        old.sendMessage(SessionMessageCodec.encode(.join(JoinRequest(room: "h", user: "old", role: .viewer, origin: 5))))
        #expect(old.pump { old.messages.contains { if case .joinRefused(.unsupportedVersion, _) = $0 { true } else { false } } })
        #expect(old.pump { old.ended } && old.closeCode == 1000)

        // Trust on first use: the key request's answer is the ready line's key; the join follows.
        let learner = try RawWebSocket(port: web.port, serverKey: nil)
        learner.send(.join(JoinRequest(room: "h", user: "learner", role: .viewer, origin: 6)))
        #expect(Self.joined(learner))
        #expect(learner.stream?.serverKey == web.key)

        let rogue = try web.socket(pinning: [UInt8](repeating: 9, count: 32))
        rogue.send(.join(JoinRequest(room: "h", user: "rogue", role: .viewer, origin: 7)))
        #expect(rogue.pump { rogue.streamError != nil })
        #expect(rogue.streamError == .keyMismatch(presented: web.key))
        #expect(rogue.pump { rogue.ended })

        // A joined socket that sends a message that does not open is closed (1008); the room goes on.
        let forger = try web.socket()
        forger.send(.join(JoinRequest(room: "h", user: "forger", role: .presenter, origin: 8)))
        #expect(Self.joined(forger))
        forger.sendMessage([0x20] + [UInt8](repeating: 0x41, count: 40))
        #expect(forger.pump { forger.closeCode != nil } && forger.closeCode == 1008)
        #expect(web.daemon.waitForLine(containing: "web socket closed: sealed stream failed") != nil)
        #expect(Self.stillServes(bystander, originSeq: 1))

        // The status page counts the page's session as sealed.
        let status = try httpGet(port: web.port, path: "/status.json").text
        #expect(status.contains("\"transport\":\"web\"") && status.contains("\"sealed\":true") && !status.contains("\"sealed\":false"))
        #expect(status.contains(PublicKeyText.encode(web.key)))
    }
}

