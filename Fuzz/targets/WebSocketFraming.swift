// fuzz-modules: InkWeb
// A WebSocket connection (server role, small limits) fed arbitrary bytes in arbitrary reads:
// never a trap, every message within the message bound, at most one pending pong, and once
// closed nothing more is delivered. Also the request-head parser and the upgrade check on the
// same bytes.

private let limits = WebSocketLimits(maxMessageBytes: 2048, maxFragments: 8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocketFraming(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard !bytes.isEmpty else { return 0 }
    // The first byte picks the read size, so frames are split at every place.
    let step = Int(bytes[0] % 17) + 1
    var ws = WebSocketConnection(role: .server, limits: limits)
    var index = 1
    var closed = false
    while index < bytes.count {
        let end = min(bytes.count, index + step)
        ws.handleBytes(Array(bytes[index..<end]))
        index = end
        while let event = ws.pollEvent() {
            precondition(!closed, "an event after the connection closed")
            switch event {
            case .message(let m): precondition(m.count <= limits.maxMessageBytes)
            case .text: preconditionFailure("a server delivered a text message")
            case .pong(let p): precondition(p.count <= 125)
            case .closed: closed = true
            }
        }
        if let out = ws.pollTransmit() {
            // A server's own frames decode as a client would read them.
            var reader = WebSocketFrameDecoder(sender: .server, maxFramePayload: 1 << 20)
            reader.handleBytes(out)
            var frames = 0
            while let frame = try? reader.pollFrame() {
                frames += 1
                precondition(frame.opcode == .pong || frame.opcode == .close)
            }
            precondition(frames > 0 && reader.bufferedByteCount == 0, "unreadable output")
        }
    }
    if let end = try? HTTPRequestHead.end(in: bytes), let head = try? HTTPRequestHead.parse(bytes[..<end]) {
        precondition(head.headers.count <= HTTPRequestHead.maxHeaders)
        _ = try? WebSocketHandshake.respond(to: head, allowedOrigins: ["http://a"], sha1: { _ in [UInt8](repeating: 0, count: 20) })
    }
    return 0
}
