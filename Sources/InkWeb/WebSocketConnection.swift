// One WebSocket after its opening handshake (RFC 6455 sections 5-7), sans IO: bytes in with
// `handleBytes`, whole binary messages out with `pollEvent`, bytes to write with `pollTransmit`.
// It answers pings, keeps fragments within bounds, and runs the closing handshake. The daemon's
// web sessions use the server role; tests and the benchmark's DevTools client the client role.

public struct WebSocketLimits: Sendable, Equatable {
    /// Largest message (all its fragments) accepted, in bytes; larger closes with 1009.
    public var maxMessageBytes: Int
    /// Most frames one message may be cut into; more closes with 1008.
    public var maxFragments: Int

    public init(maxMessageBytes: Int = 1 << 20, maxFragments: Int = 1024) {
        self.maxMessageBytes = maxMessageBytes
        self.maxFragments = maxFragments
    }
}

public enum WebSocketEvent: Equatable, Sendable {
    /// A whole binary message.
    case message([UInt8])
    /// A whole text message (the client role only; a server closes on text with 1003).
    case text(String)
    case pong([UInt8])
    /// The connection is closed: by the peer's close frame (`code` it sent, nil if none), or by
    /// this end for `error` (a close frame with its code was queued). Write what `pollTransmit`
    /// still gives, then close the TCP connection.
    case closed(code: UInt16?, reason: String, error: WebSocketError?)
}

public struct WebSocketConnection: Sendable {
    public enum Role: Sendable { case server, client }

    public let role: Role
    public let limits: WebSocketLimits
    private var decoder: WebSocketFrameDecoder
    /// The data message being reassembled (its opcode and bytes so far).
    private var partial: (opcode: WebSocketOpcode, bytes: [UInt8], frames: Int)?
    private var outgoing: [UInt8] = []
    /// The latest ping's payload not yet answered (RFC 6455 5.5.3 allows answering only the
    /// latest): a ping flood costs one pending pong, never a growing queue.
    private var pendingPong: [UInt8]?
    private var events: [WebSocketEvent] = []
    private var eventStart = 0
    /// A close frame went out; nothing but the closing handshake follows.
    public private(set) var closeSent = false
    /// The connection is over (close frames exchanged, or a violation).
    public private(set) var isClosed = false
    /// For the client role: the mask of each frame (RFC 6455 5.3 wants it unpredictable).
    private var nextMask: @Sendable () -> (UInt8, UInt8, UInt8, UInt8)

    public init(role: Role, limits: WebSocketLimits = WebSocketLimits(),
                mask: @escaping @Sendable () -> (UInt8, UInt8, UInt8, UInt8) = { (0, 0, 0, 0) }) {
        self.role = role
        self.limits = limits
        nextMask = mask
        decoder = WebSocketFrameDecoder(sender: role == .server ? .client : .server, maxFramePayload: limits.maxMessageBytes)
    }

    /// Bytes received and not yet a whole frame.
    public var bufferedByteCount: Int { decoder.bufferedByteCount }

    // MARK: inputs

    public mutating func handleBytes(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed else { return }
        decoder.handleBytes(bytes)
        do {
            while !isClosed, let frame = try decoder.pollFrame() { try handle(frame) }
        } catch {
            fail(error)
        }
    }

    public mutating func handleBytes(_ bytes: [UInt8]) { bytes.withUnsafeBytes { handleBytes($0) } }

    /// Sends one binary message (one frame). Ignored once closing.
    public mutating func send(_ message: [UInt8]) {
        guard !closeSent else { return }
        write(WebSocketFrame(opcode: .binary, payload: message))
    }

    /// Sends one text message (client role: the DevTools protocol speaks JSON text).
    public mutating func sendText(_ text: String) {
        guard !closeSent else { return }
        write(WebSocketFrame(opcode: .text, payload: Array(text.utf8)))
    }

    public mutating func sendPing(_ payload: [UInt8] = []) {
        guard !closeSent else { return }
        write(WebSocketFrame(opcode: .ping, payload: Array(payload.prefix(125))))
    }

    /// Starts the closing handshake (the peer's close frame then ends it).
    public mutating func close(_ code: WebSocketCloseCode = .normal, reason: String = "") {
        guard !closeSent else { return }
        writeClose(code.rawValue, reason)
    }

    // MARK: outputs

    /// Everything to write now, nil when nothing is.
    public mutating func pollTransmit() -> [UInt8]? {
        if let pong = pendingPong, !closeSent {
            pendingPong = nil
            write(WebSocketFrame(opcode: .pong, payload: pong))
        }
        guard !outgoing.isEmpty else { return nil }
        defer { outgoing = [] }
        return outgoing
    }

    public mutating func pollEvent() -> WebSocketEvent? {
        guard eventStart < events.count else { return nil }
        let e = events[eventStart]
        eventStart += 1
        if eventStart == events.count {
            events.removeAll(keepingCapacity: true)
            eventStart = 0
        }
        return e
    }

    // MARK: frames

    private mutating func handle(_ frame: WebSocketFrame) throws(WebSocketError) {
        switch frame.opcode {
        case .ping:
            pendingPong = frame.payload
        case .pong:
            events.append(.pong(frame.payload))
        case .close:
            try peerClosed(frame.payload)
        case .text, .binary:
            guard partial == nil else { throw WebSocketError(.protocolError, "a new message inside a fragmented one") }
            if frame.fin {
                try deliver(frame.opcode, frame.payload)
            } else {
                partial = (frame.opcode, frame.payload, 1)
            }
        case .continuation:
            guard var message = partial else { throw WebSocketError(.protocolError, "a continuation frame with no message to continue") }
            message.frames += 1
            guard message.frames <= limits.maxFragments else {
                throw WebSocketError(.policyViolation, "message in more than \(limits.maxFragments) fragments")
            }
            guard message.bytes.count + frame.payload.count <= limits.maxMessageBytes else {
                throw WebSocketError(.tooBig, "message larger than \(limits.maxMessageBytes) bytes")
            }
            message.bytes.append(contentsOf: frame.payload)
            if frame.fin {
                partial = nil
                try deliver(message.opcode, message.bytes)
            } else {
                partial = message
            }
        }
    }

    private mutating func deliver(_ opcode: WebSocketOpcode, _ bytes: [UInt8]) throws(WebSocketError) {
        guard !closeSent else { return }  // data after our close frame is dropped (RFC 6455 7.1.4)
        if opcode == .binary {
            events.append(.message(bytes))
            return
        }
        guard role == .client else { throw WebSocketError(.unsupportedData, "text messages are not session messages (send binary)") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw WebSocketError(.invalidPayload, "text message not UTF-8") }
        events.append(.text(text))
    }

    private mutating func peerClosed(_ payload: [UInt8]) throws(WebSocketError) {
        var code: UInt16?
        var reason = ""
        if payload.count == 1 { throw WebSocketError(.protocolError, "close frame with a 1-byte payload") }
        if payload.count >= 2 {
            let c = UInt16(payload[0]) << 8 | UInt16(payload[1])
            guard WebSocketConnection.isValidCloseCode(c) else { throw WebSocketError(.protocolError, "close code \(c)") }
            guard let text = String(validating: payload[2...], as: UTF8.self) else {
                throw WebSocketError(.invalidPayload, "close reason not UTF-8")
            }
            code = c
            reason = text
        }
        if !closeSent { writeClose(code ?? WebSocketCloseCode.normal.rawValue, "") }
        isClosed = true
        events.append(.closed(code: code, reason: reason, error: nil))
    }

    private mutating func fail(_ error: WebSocketError) {
        if !closeSent { writeClose(error.code.rawValue, error.reason) }
        isClosed = true
        partial = nil
        events.append(.closed(code: nil, reason: error.reason, error: error))
    }

    private mutating func writeClose(_ code: UInt16, _ reason: String) {
        var payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        // A close frame's payload is at most 125 bytes: cut the reason on a character boundary.
        var text = ""
        for ch in reason where text.utf8.count + String(ch).utf8.count <= 123 { text.append(ch) }
        payload.append(contentsOf: text.utf8)
        write(WebSocketFrame(opcode: .close, payload: payload))
        closeSent = true
    }

    private mutating func write(_ frame: WebSocketFrame) {
        outgoing.append(contentsOf: frame.encoded(mask: role == .client ? nextMask() : nil))
    }

    /// Codes a peer may send in a close frame (RFC 6455 7.4).
    static func isValidCloseCode(_ c: UInt16) -> Bool {
        switch c {
        case 1000...1003, 1007...1011: true
        case 3000...4999: true
        default: false
        }
    }
}
