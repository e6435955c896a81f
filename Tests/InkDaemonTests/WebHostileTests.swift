import Foundation
import Glibc
import InkCodec
import InkProtocol
import InkWeb
import Testing

/// A WebSocket client on a blocking loopback socket, as a hostile or plain program would be.
final class RawWebSocket {
    let fd: Int32
    private var socket = WebSocketConnection(role: .client, limits: WebSocketLimits(maxMessageBytes: 8 << 20), mask: { (1, 2, 3, 4) })
    private(set) var messages: [ServerMessage] = []
    private(set) var closeCode: UInt16?
    private(set) var ended = false
    /// The HTTP status of the upgrade answer.
    private(set) var status = 0

    init(port: UInt16, origin: String? = nil, subprotocol: String = "inkwire.v1") throws {
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

    func send(_ message: ClientMessage) {
        socket.send(SessionMessageCodec.encode(message))
        if let out = socket.pollTransmit() { sendRaw(out) }
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
                if let m = try? SessionMessageCodec.decodeServer(bytes) { messages.append(m) }
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
    static func start(_ tag: String, extra: [String] = []) throws -> (DaemonProcess, UInt16) {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--web", "127.0.0.1:0"] + extra, tag: tag)
        let fields = try daemon.ready()
        return (daemon, DaemonProcess.port(fields["web"])!)
    }

    /// A joined page-like client that keeps working while others misbehave.
    static func joinedBystander(port: UInt16, room: String) throws -> RawWebSocket {
        let ws = try RawWebSocket(port: port)
        ws.send(.join(JoinRequest(room: room, user: "bystander", role: .presenter, origin: 99)))
        #expect(ws.pump { ws.messages.contains { if case .joinAccepted = $0 { true } else { false } } })
        return ws
    }

    static func stillServes(_ ws: RawWebSocket, originSeq: UInt64) -> Bool {
        var state = BinaryCodecState()
        let batch = Batch(author: AuthorID(0), commands: [TimedCommand(timeMs: 0, command: .point(StrokePoint(stroke: StrokeID(UInt32(originSeq)), phase: .start, x: 1, y: 2)))])
        ws.send(.batch(originSeq: originSeq, payload: try! BinaryBatchCodec.encode(batch, state: &state)))
        return ws.pump { ws.messages.contains { if case .batchAck(originSeq, _) = $0 { true } else { false } } }
    }

    @Test func malformedFramesCloseThatConnectionOnly() throws {
        let (daemon, port) = try Self.start("web-bad-frames")
        let bystander = try Self.joinedBystander(port: port, room: "h")
        // Unmasked, reserved bits, a text message, an unknown opcode, a 2^63 length.
        let bad: [([UInt8], UInt16)] = [
            (WebSocketFrame(opcode: .binary, payload: [1, 2]).encoded(), 1002),
            ([0xF2, 0x80, 1, 2, 3, 4], 1002),
            (WebSocketFrame(opcode: .text, payload: Array("hello".utf8)).encoded(mask: (1, 1, 1, 1)), 1003),
            ([0x8B, 0x80, 1, 2, 3, 4], 1002),
            ([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4], 1002),
        ]
        for (bytes, code) in bad {
            let ws = try RawWebSocket(port: port)
            #expect(ws.status == 101)
            ws.sendRaw(bytes)
            #expect(ws.pump { ws.closeCode != nil }, "no close frame for \(bytes.prefix(4))")
            #expect(ws.closeCode == code)
            #expect(ws.pump { ws.ended }, "the daemon did not close the connection")
        }
        #expect(daemon.waitForLine(containing: "web socket closed: protocol error") != nil)
        #expect(Self.stillServes(bystander, originSeq: 1))
    }

    @Test func oversizeMessagesAndHeadsAreRefused() throws {
        let (daemon, port) = try Self.start("web-oversize", extra: ["--max-frame", "4096"])
        let bystander = try Self.joinedBystander(port: port, room: "h")
        let ws = try RawWebSocket(port: port)
        ws.sendRaw(WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 0, count: 5000)).encoded(mask: (9, 9, 9, 9)))
        #expect(ws.pump { ws.closeCode != nil } && ws.closeCode == 1009)
        // The same bytes in 100-byte fragments: the message bound holds across fragments.
        let fragmented = try RawWebSocket(port: port)
        for i in 0..<50 {
            fragmented.sendRaw(WebSocketFrame(fin: false, opcode: i == 0 ? .binary : .continuation, payload: [UInt8](repeating: 7, count: 100)).encoded(mask: (1, 2, 3, 4)))
        }
        #expect(fragmented.pump { fragmented.closeCode != nil } && fragmented.closeCode == 1009)
        // A request head past 8 KiB gets 431 and a close.
        let fd = try connectLoopback(port: port, type: SOCK_STREAM)
        defer { close(fd) }
        let head = Array(("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n").utf8)
        _ = head.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&pfd, 1, 3000)
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(n > 0 && String(decoding: buffer[..<max(0, n)], as: UTF8.self).hasPrefix("HTTP/1.1 431"))
        #expect(daemon.waitForLine(containing: "web request refused") != nil)
        #expect(Self.stillServes(bystander, originSeq: 1))
    }

    @Test func foreignOriginsAndSubprotocolsAreRefused() throws {
        let (daemon, port) = try Self.start("web-origin", extra: ["--web-origin", "https://board.school.example"])
        defer { withExtendedLifetime(daemon) {} }
        #expect(try RawWebSocket(port: port, origin: "http://evil.example").status == 403)
        #expect(try RawWebSocket(port: port, subprotocol: "chat").status == 400)
        #expect(try RawWebSocket(port: port, origin: "http://127.0.0.1:\(port)").status == 101)
        #expect(try RawWebSocket(port: port, origin: "https://board.school.example").status == 101)
    }

    @Test func floodsCloseThatConnectionOnly() throws {
        let (daemon, port) = try Self.start("web-flood", extra: ["--max-web-connections", "6"])
        let bystander = try Self.joinedBystander(port: port, room: "h")
        // A ping flood costs one pong at a time: the connection stays usable.
        let pinger = try RawWebSocket(port: port)
        pinger.sendRaw((0..<5000).flatMap { _ in WebSocketFrame(opcode: .ping, payload: [1, 2, 3]).encoded(mask: (5, 5, 5, 5)) })
        pinger.send(.join(JoinRequest(room: "h", user: "pinger", role: .viewer, origin: 7)))
        #expect(pinger.pump { pinger.messages.contains { if case .joinAccepted = $0 { true } else { false } } })
        // A flood of malformed messages: errors, then the daemon ends that session.
        let flooder = try RawWebSocket(port: port)
        flooder.send(.join(JoinRequest(room: "h", user: "flooder", role: .presenter, origin: 8)))
        for _ in 0..<200 { flooder.sendRaw(WebSocketFrame(opcode: .binary, payload: [1, 2, 200, 1]).encoded(mask: (1, 2, 3, 4))) }
        #expect(flooder.pump(limitMicroseconds: 5_000_000) { flooder.messages.contains { if case .goingAway(.tooManyErrors, _) = $0 { true } else { false } } })
        #expect(flooder.pump { flooder.ended })
        // A connection flood: past --max-web-connections, new ones are closed at once.
        var extra: [Int32] = []
        for _ in 0..<8 { extra.append(try connectLoopback(port: port, type: SOCK_STREAM)) }
        #expect(daemon.waitForLine(containing: "web connection refused: too many") != nil)
        for fd in extra { close(fd) }
        #expect(Self.stillServes(bystander, originSeq: 1))
    }

    @Test func silentReadersAreClosed() throws {
        let (daemon, port) = try Self.start("web-silent", extra: ["--web-idle-ms", "400"])
        let bystander = try Self.joinedBystander(port: port, room: "h")
        // A reader that neither reads nor answers pings: pinged after 0.8 s of silence, closed
        // 0.4 s later. The bystander reads (and answers the pings) all along.
        let silent = try RawWebSocket(port: port)
        silent.send(.join(JoinRequest(room: "h", user: "silent", role: .viewer, origin: 9)))
        bystander.pump(limitMicroseconds: 10_000_000) { daemon.log.contains("web socket closed: silent") }
        #expect(daemon.waitForLine(containing: "web socket closed: silent") != nil)
        _ = silent
        #expect(Self.stillServes(bystander, originSeq: 1))
    }
}
