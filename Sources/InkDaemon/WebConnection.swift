import InkProtocol
import InkRelay
import InkUV
import InkWeb

/// One TCP connection to the web listener: TLS or not (its first byte says), then HTTP/1.1
/// requests (kept alive, one at a time), and after a WebSocket upgrade on `/ws` a sealed stream
/// (docs/protocol.md 4.6, 8.5), one stream message per binary WebSocket message, carrying one
/// relay session exactly as a native TCP connection does: the first message is admitted by
/// `Daemon.admitStream`, then every message must open; native TCP's limits and permissions.
///
/// Bad input closes this connection only, with a log line: a malformed or oversized request
/// head (400/431, then close), a TLS failure, a WebSocket protocol violation or a message over
/// `--max-frame` (a close frame with its code), a reader too slow for its write queue.
final class WebConnection: RelaySessionTransport {
    let connection: TCPConnection
    private unowned let listener: WebListener
    private unowned let daemon: Daemon
    private let onClosed: (WebConnection) -> Void
    private var remote = "?"
    private var tls: TLSServerSession?
    private var sniffed = false
    private var request: [UInt8] = []
    private var requestsServed = 0
    private var webSocket: WebSocketConnection?
    private var sealed: SealedStreamSession?
    private var answeredKeyRequest = false
    private var session: SessionID?
    private var blocked = false
    private var closed = false
    /// Half-closing after a last response or a closing handshake: reads are ignored.
    private var finishing = false
    /// When the connection must have made progress (a request head, or any frame on a socket).
    private var deadline: UInt64 = 0
    private var pingSent = false

    /// A new connection must send its request head (and a kept-alive one its next) within this.
    static let requestTimeoutMicroseconds: UInt64 = 10_000_000
    static let keepAliveMicroseconds: UInt64 = 30_000_000
    /// A WebSocket silent this long gets a ping; silent twice as long, it is closed (`--web-idle-ms`).
    private var webSocketIdleMicroseconds: UInt64 { daemon.config.limits.webIdleMs * 1000 }
    /// Requests one kept-alive connection may make.
    static let maxRequestsPerConnection = 1000
    /// Queued bytes above which the relay holds back (it resumes when the queue drains).
    static let backpressureHighBytes = 1 << 20
    /// A WebSocket message from the page larger than the TCP frame bound closes it; so may its fragments.
    static let maxFragments = 1024

    init(connection: TCPConnection, listener: WebListener, onClosed: @escaping (WebConnection) -> Void) {
        self.connection = connection
        self.listener = listener
        daemon = listener.daemon
        self.onClosed = onClosed
    }

    func start() {
        remote = connection.remoteAddress?.description ?? "?"
        deadline = daemon.loop.now + WebConnection.requestTimeoutMicroseconds
        try? connection.setNoDelay(true)
        connection.onError = { [weak self] error in self?.close(reason: "write failed: \(error)") }
        connection.onDrain = { [weak self] in
            guard let self, self.blocked, let session = self.session else { return }
            self.blocked = false
            self.daemon.driver.ready(session)
        }
        do {
            try connection.startReading({ [weak self] bytes in self?.received(bytes) },
                                        onEnd: { [weak self] error in self?.close(reason: error.map { "read failed: \($0)" } ?? "peer closed") })
        } catch {
            close(reason: "read failed: \(error)")
        }
    }

    var linkStatus: LinkStatus {
        var status = LinkStatus(address: connection.remoteAddress, tcp: connection.info)
        status.sealed = sealed != nil && daemon.sealsSessions
        return status
    }

    // MARK: bytes in

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, !finishing else { return }
        daemon.metrics.bytesReceived.labels("web").increment(by: UInt64(bytes.count))
        if !sniffed {
            sniffed = true
            // A TLS record of type handshake (22) starts every TLS connection; HTTP starts with a letter.
            if bytes.first == 0x16 {
                guard let context = listener.tls else { return close(reason: "TLS attempted but the listener has no certificate") }
                do { tls = try TLSServerSession(context: context) } catch { return close(reason: "\(error)") }
            }
        }
        guard let tls else { return plaintextReceived(bytes) }
        do {
            try tls.handleCiphertext(bytes)
        } catch {
            flushCiphertext()
            daemon.metrics.errors(kind: "web_tls").increment()
            return close(reason: "\(error)")
        }
        flushCiphertext()
        while !closed, let plain = tls.pollPlaintext() {
            plain.withUnsafeBytes { plaintextReceived($0) }
        }
        if tls.peerClosed && !closed { close(reason: "peer closed (TLS close_notify)") }
    }

    private func plaintextReceived(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, !finishing else { return }
        if webSocket != nil { return webSocketReceived(bytes) }
        request.append(contentsOf: bytes)
        while !closed, !finishing, webSocket == nil {
            let end: Int?
            do { end = try HTTPRequestHead.end(in: request) } catch {
                return refuse(error.status, error.description)
            }
            guard let end else { return }
            let head: HTTPRequestHead
            do { head = try HTTPRequestHead.parse(request[..<end]) } catch {
                return refuse(error.status, error.description)
            }
            request.removeSubrange(..<end)
            requestsServed += 1
            serve(head)
        }
        // Bytes after the upgrade request belong to the WebSocket.
        if webSocket != nil, !request.isEmpty {
            let rest = request
            request = []
            rest.withUnsafeBytes { webSocketReceived($0) }
        }
    }

    // MARK: HTTP

    private func serve(_ head: HTTPRequestHead) {
        let path = head.path
        if path == "/ws" { return upgrade(head) }
        guard head.method == "GET" || head.method == "HEAD" else {
            return respond(405, "text/plain; charset=utf-8", Array("method not allowed\n".utf8), head: head, extra: "Allow: GET, HEAD\r\n")
        }
        let pages = WebPages(daemon: daemon, listener: listener)
        guard let (status, type, body) = pages.response(path: path) else {
            return respond(404, "text/plain; charset=utf-8", Array("not found\n".utf8), head: head)
        }
        respond(status, type, body, head: head)
    }

    private func respond(_ status: Int, _ type: String, _ body: [UInt8], head: HTTPRequestHead?, extra: String = "") {
        let keepAlive = head.map { $0.keepsAlive && requestsServed < WebConnection.maxRequestsPerConnection } ?? false
        var text = "HTTP/1.1 \(status) \(WebConnection.reason(status))\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\n"
        text += "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
        text += "Content-Security-Policy: default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'\r\n"
        text += extra
        text += keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n"
        var bytes = Array(text.utf8)
        if head?.method != "HEAD" { bytes += body }
        send(bytes)
        if keepAlive {
            deadline = daemon.loop.now + WebConnection.keepAliveMicroseconds
        } else {
            finish()
        }
    }

    /// A bad request: answered, then the connection is closed (its stream cannot be trusted).
    private func refuse(_ status: Int, _ why: String) {
        daemon.metrics.errors(kind: "web_bad_request").increment()
        daemon.logger.notice("web request refused", ["remote": remote, "status": status, "reason": why])
        request = []
        respond(status, "text/plain; charset=utf-8", Array((why + "\n").utf8), head: nil)
    }

    private func upgrade(_ head: HTTPRequestHead) {
        let origins = WebSocketHandshake.ownOrigins(host: head.header("host")) + daemon.config.webOrigins
        let response: [UInt8]
        do {
            response = try WebSocketHandshake.respond(to: head, allowedOrigins: origins, sha1: WebCrypto.sha1)
        } catch {
            daemon.metrics.errors(kind: "web_upgrade_refused").increment()
            daemon.logger.notice("web socket refused", ["remote": remote, "reason": error.description])
            return respond(error.status, "text/plain; charset=utf-8", Array((error.description + "\n").utf8), head: nil)
        }
        send(response)
        webSocket = WebSocketConnection(role: .server, limits: WebSocketLimits(maxMessageBytes: daemon.config.limits.maxFrameBytes,
                                                                                maxFragments: WebConnection.maxFragments))
        deadline = daemon.loop.now + 2 * webSocketIdleMicroseconds
    }

    // MARK: WebSocket

    private func webSocketReceived(_ bytes: UnsafeRawBufferPointer) {
        guard webSocket != nil else { return }
        deadline = daemon.loop.now + 2 * webSocketIdleMicroseconds
        pingSent = false
        webSocket!.handleBytes(bytes)
        pumpWebSocket()
    }

    private func pumpWebSocket() {
        while !closed, let event = webSocket?.pollEvent() {
            switch event {
            case .message(let bytes):
                streamMessage(bytes)
            case .text, .pong:
                break
            case .closed(let code, let reason, let error):
                flushWebSocket()
                if let error {
                    daemon.metrics.errors(kind: "web_protocol").increment()
                    daemon.logger.notice("web socket closed: protocol error", ["remote": remote, "reason": error.description])
                    endSession()
                    finish()
                } else {
                    endSession()
                    daemon.logger.info("web socket closed by the page", ["remote": remote, "code": code.map(String.init) ?? "none", "reason": reason])
                    finish()
                }
                return
            }
        }
        flushWebSocket()
    }

    private func flushWebSocket() {
        if let bytes = webSocket?.pollTransmit() { send(bytes) }
    }

    // MARK: the sealed stream

    /// One binary WebSocket message: one stream message of the sealed session.
    private func streamMessage(_ message: [UInt8]) {
        guard !finishing else { return }
        guard let sealed else { return first(message) }
        do {
            try sealed.handleMessage(message, now: Instant(microseconds: daemon.loop.now))
        } catch {
            daemon.metrics.errors(kind: error == .unauthenticated ? "unauthenticated_packet" : "unexpected_packet").increment()
            daemon.logger.notice("web socket closed: sealed stream failed", ["remote": remote, "reason": error.description])
            return closeWebSocket(.policyViolation, reason: "sealed stream: \(error)")
        }
        while !closed, !finishing, let event = sealed.pollEvent() {
            switch event {
            case .delivered(let bytes):
                if let session { daemon.driver.message(bytes, from: session) }
            case .confirmed:
                if let session { daemon.driver.confirmed(session) }
            default:
                break
            }
        }
        flushSealed()
    }

    /// The stream's first message (`Daemon.admitStream`, as on native TCP).
    private func first(_ message: [UInt8]) {
        switch daemon.admitStream(message, remote: remote, keyRequested: answeredKeyRequest) {
        case .answer(let reply):
            answeredKeyRequest = true
            sendMessage(reply)
        case .answerAndClose(let answer, let reason):
            sendMessage(answer)
            daemon.logger.info("web socket answered and closed", ["remote": remote, "reason": reason])
            closeWebSocket(.normal, reason: reason)
        case .close(let reason):
            daemon.logger.notice("web socket closed: bad first message", ["remote": remote, "reason": reason])
            closeWebSocket(.policyViolation, reason: reason)
        case .accepted(let stream, let join):
            sealed = stream
            flushSealed()
            daemon.metrics.sessions.labels("web").add(1)
            session = daemon.driver.open(self, kind: .web, confirmed: false, from: connection.remoteAddress)
            if let session, !closed { daemon.driver.message(join, from: session) }
        }
    }

    private func flushSealed() {
        while !closed, let m = sealed?.pollMessage() { sendMessage(m) }
    }

    private func sendMessage(_ message: [UInt8]) {
        guard !closed, !finishing, webSocket != nil else { return }
        webSocket!.send(message)
        flushWebSocket()
    }

    /// Ends the socket from this side: the relay session (if any), a close frame, then FIN.
    private func closeWebSocket(_ code: WebSocketCloseCode, reason: String) {
        endSession()
        webSocket?.close(code, reason: reason)
        flushWebSocket()
        finish()
    }

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !closed, !finishing, let sealed else { return }
        sealed.send(encoder.encode(message), now: Instant(microseconds: daemon.loop.now))
        flushSealed()
        if !blocked && connection.writeQueueBytes > WebConnection.backpressureHighBytes, let session {
            blocked = true
            daemon.driver.backpressure(session)
        }
    }

    /// The relay is done with the session: its goodbye is queued; close the WebSocket after it.
    func relayClosed(_ reason: GoingAwayReason) {
        session = nil
        daemon.metrics.sessions.labels("web").add(-1)
        guard !closed else { return }
        webSocket?.close(reason == .shuttingDown ? .goingAway : .normal, reason: "session closed: \(reason)")
        flushWebSocket()
        finish()
    }

    private func endSession() {
        guard let session else { return }
        self.session = nil
        daemon.metrics.sessions.labels("web").add(-1)
        daemon.driver.transportClosed(session)
    }

    // MARK: bytes out

    private func send(_ bytes: [UInt8]) {
        guard !closed else { return }
        do {
            if let tls {
                try tls.write(bytes)
                flushCiphertext()
            } else {
                try write(bytes)
            }
        } catch let error as UVError {
            close(reason: error.code == UVError.noBufferSpace ? "peer too slow (write queue full)" : "write failed: \(error)")
        } catch {
            daemon.metrics.errors(kind: "web_tls").increment()
            close(reason: "\(error)")
        }
    }

    private func flushCiphertext() {
        while !closed, let out = tls?.pollCiphertext() {
            do { try write(out) } catch {
                close(reason: error.code == UVError.noBufferSpace ? "peer too slow (write queue full)" : "write failed: \(error)")
            }
        }
    }

    private func write(_ bytes: [UInt8]) throws(UVError) {
        _ = try connection.write(bytes)
        daemon.metrics.bytesSent.labels("web").increment(by: UInt64(bytes.count))
    }

    /// Sends what is queued (a TLS close_notify too), half-closes, and closes when the peer does
    /// (or at the deadline).
    private func finish() {
        guard !finishing, !closed else { return }
        finishing = true
        tls?.shutdown()
        flushCiphertext()
        deadline = daemon.loop.now + WebConnection.requestTimeoutMicroseconds
        connection.shutdown { [weak self] _ in
            // The peer's close (read end) or the deadline closes the socket.
            _ = self
        }
    }

    func checkDeadlines(now: UInt64) {
        guard !closed, now >= deadline else { return }
        if finishing { return close(reason: "closed") }
        if webSocket != nil {
            if !pingSent {
                pingSent = true
                webSocket!.sendPing()
                flushWebSocket()
                deadline = now + webSocketIdleMicroseconds
                return
            }
            daemon.logger.notice("web socket closed: silent", ["remote": remote])
            webSocket!.close(.goingAway, reason: "silent")
            flushWebSocket()
            endSession()
            return close(reason: "silent")
        }
        close(reason: requestsServed == 0 ? "no request in time" : "idle")
    }

    func close(reason: String) {
        guard !closed else { return }
        closed = true
        connection.close()
        daemon.logger.info("web connection closed", ["remote": remote, "reason": reason, "requests": requestsServed])
        endSession()
        onClosed(self)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 101: "Switching Protocols"
        case 200: "OK"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 426: "Upgrade Required"
        case 431: "Request Header Fields Too Large"
        default: "Error"
        }
    }
}
