import InkUV

/// Serves `GET /metrics` over HTTP/1.1 on the event loop: one request per connection, answered
/// with `Connection: close`. Other paths get 404, other methods 405, oversized or malformed
/// requests 431/400. After answering it half-closes and waits (bounded) for the client to close,
/// so unread request bytes never turn the close into a reset that could eat the response.
///
/// Monitoring must not be starved by clients that connect and say nothing: a client has
/// `requestTimeoutMicroseconds` to send its request, and a new connection always gets a slot,
/// taking the place of the oldest unanswered client of its address (at
/// `maximumConnectionsPerAddress`) or of all (at `maximumConnections`). A scraper sends its
/// request at once, so idle connections, however many and however often, go before it does.
public final class MetricsServer {
    /// Largest request head accepted (request line and headers).
    public static let maximumRequestBytes = 8 * 1024
    /// Most clients held at once; a new connection past it takes the oldest one's place.
    public static let maximumConnections = 64
    /// Most clients of one address held at once; a new one past it takes the place of that
    /// address's oldest.
    public static let maximumConnectionsPerAddress = 8
    /// How long a client may take to send its whole request head (a scraper sends it at once).
    public static let requestTimeoutMicroseconds: UInt64 = 2_000_000
    /// How long a client may take to close after the response.
    public static let lingerMicroseconds: UInt64 = 1_000_000
    /// How often stale clients are swept.
    static let sweepIntervalMicroseconds: UInt64 = 250_000

    private let loop: EventLoop
    private let listener: TCPListener
    private let render: () -> String
    private var clients: [ObjectIdentifier: Client] = [:]
    private var sweepTimer: LoopTimer?
    /// Responses written, by status code (for tests and the server's own metrics).
    public private(set) var responses: [Int: UInt64] = [:]
    /// Clients closed without an answer: `timeout` (no whole request in time) or `evicted`
    /// (a newer connection took the place).
    public private(set) var dropped: [String: UInt64] = [:]
    private var accepted: UInt64 = 0

    private final class Client {
        let connection: TCPConnection
        /// The peer's address without its port (nil: unknown).
        let host: SocketAddress?
        /// Accept order: lower is older.
        let number: UInt64
        var request: [UInt8] = []
        var deadline: UInt64
        var answered = false
        init(connection: TCPConnection, host: SocketAddress?, number: UInt64, deadline: UInt64) {
            self.connection = connection
            self.host = host
            self.number = number
            self.deadline = deadline
        }
    }

    /// Clients held now (tests).
    public var clientCount: Int { clients.count }

    /// Listens on `address` (port 0 picks a free port); `render` produces the body per request.
    public convenience init(loop: EventLoop, bindTo address: SocketAddress, render: @escaping () -> String) throws(UVError) {
        try self.init(loop: loop, listener: try TCPListener(loop: loop, bindTo: address), render: render)
    }

    /// Serves on an adopted listening socket (systemd socket activation).
    public convenience init(loop: EventLoop, adopting fd: Int32, render: @escaping () -> String) throws(UVError) {
        try self.init(loop: loop, listener: try TCPListener(loop: loop, adopting: fd), render: render)
    }

    private init(loop: EventLoop, listener: TCPListener, render: @escaping () -> String) throws(UVError) {
        self.loop = loop
        self.listener = listener
        self.render = render
        do {
            try listener.listen { [weak self] connection in self?.accept(connection) }
        } catch {
            listener.close()
            throw error
        }
    }

    public var localAddress: SocketAddress? { listener.localAddress }

    /// Stops listening and closes every client.
    public func close() {
        listener.close()
        sweepTimer?.close()
        sweepTimer = nil
        for client in clients.values { client.connection.close() }
        clients.removeAll()
    }

    private func accept(_ connection: TCPConnection) {
        let host = connection.remoteAddress.map { $0.unmappedIPv4.withPort(0) }
        let sameHost = clients.values.filter { $0.host == host }
        if sameHost.count >= MetricsServer.maximumConnectionsPerAddress, let victim = MetricsServer.oldest(sameHost) {
            evict(victim)
        }
        if clients.count >= MetricsServer.maximumConnections, let victim = MetricsServer.oldest(Array(clients.values)) {
            evict(victim)
        }
        accepted += 1
        let client = Client(connection: connection, host: host, number: accepted, deadline: loop.now + MetricsServer.requestTimeoutMicroseconds)
        let key = ObjectIdentifier(connection)
        clients[key] = client
        connection.onClose = { [weak self] in self?.clients[key] = nil }
        connection.onError = { [weak connection] _ in connection?.close() }
        do {
            try connection.startReading({ [weak self, weak client] bytes in
                if let client { self?.received(bytes, from: client) }
            }, onEnd: { [weak connection] _ in
                // The client closed (or failed): nothing more to say either way.
                connection?.close()
            })
        } catch {
            connection.close()
            return
        }
        startSweeping()
    }

    /// The client to close for a newer one: the oldest not yet answered (closing it loses
    /// nothing), else the oldest answered one.
    private static func oldest(_ candidates: [Client]) -> Client? {
        candidates.min { ($0.answered ? 1 : 0, $0.number) < ($1.answered ? 1 : 0, $1.number) }
    }

    private func evict(_ client: Client) {
        if !client.answered { dropped["evicted", default: 0] &+= 1 }
        clients[ObjectIdentifier(client.connection)] = nil
        client.connection.close()
    }

    private func received(_ bytes: UnsafeRawBufferPointer, from client: Client) {
        // After the answer, drain whatever the client still sends until it closes.
        guard !client.answered else { return }
        let room = MetricsServer.maximumRequestBytes - client.request.count
        client.request.append(contentsOf: bytes.prefix(room))
        if let head = MetricsServer.requestHead(client.request) {
            var response = MetricsServer.respond(to: head)
            if response.0 == 200 { response.1 = render() }
            answer(client, response)
        } else if bytes.count > room || client.request.count >= MetricsServer.maximumRequestBytes {
            answer(client, (431, "request too large\n", nil, false))
        }
    }

    private func answer(_ client: Client, _ response: (status: Int, body: String, allow: String?, headOnly: Bool)) {
        client.answered = true
        client.request = []
        client.deadline = loop.now + MetricsServer.lingerMicroseconds
        responses[response.status, default: 0] &+= 1
        let contentType = response.status == 200 ? MetricsRegistry.contentType : "text/plain; charset=utf-8"
        let body = Array(response.body.utf8)
        var head = "HTTP/1.1 \(response.status) \(MetricsServer.reason(response.status))\r\n"
        head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        if let allow = response.allow { head += "Allow: \(allow)\r\n" }
        head += "Connection: close\r\n\r\n"
        let connection = client.connection
        do {
            try connection.write(Array(head.utf8) + (response.headOnly ? [] : body))
        } catch {
            connection.close()
            return
        }
        // FIN after the response; the client's close (onEnd) or the sweep closes the socket.
        connection.shutdown { [weak connection] error in
            if error != nil { connection?.close() }
        }
    }

    /// The request head (up to the blank line), or nil while incomplete.
    static func requestHead(_ bytes: [UInt8]) -> Substring? {
        guard bytes.count >= 2 else { return nil }
        for index in 1..<bytes.count where bytes[index] == 10 {
            // "\n\n" or "\r\n\r\n"
            if bytes[index - 1] == 10 || (index >= 3 && bytes[index - 1] == 13 && bytes[index - 2] == 10) {
                return Substring(decoding: bytes[..<index], as: UTF8.self)
            }
        }
        return nil
    }

    /// Status, body, Allow header and whether to omit the body, for one request head.
    static func respond(to head: Substring) -> (Int, String, String?, Bool) {
        // Scalars, not Characters: "\r\n" is one Character in Swift.
        let requestLine = Substring(head.unicodeScalars.prefix { $0 != "\r" && $0 != "\n" })
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") else {
            return (400, "bad request\n", nil, false)
        }
        let method = parts[0]
        guard method == "GET" || method == "HEAD" else { return (405, "method not allowed\n", "GET, HEAD", false) }
        let path = parts[1].prefix { $0 != "?" }
        guard path == "/metrics" else { return (404, "not found\n", nil, method == "HEAD") }
        return (200, "", nil, method == "HEAD")
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 431: "Request Header Fields Too Large"
        default: "Error"
        }
    }

    private func startSweeping() {
        guard sweepTimer == nil, let timer = try? LoopTimer(loop: loop) else { return }
        sweepTimer = timer
        timer.start(afterMicroseconds: MetricsServer.sweepIntervalMicroseconds,
                    repeatingEveryMicroseconds: MetricsServer.sweepIntervalMicroseconds) { [weak self] in
            self?.sweep()
        }
    }

    private func sweep() {
        let now = loop.now
        for client in clients.values where client.deadline <= now {
            if !client.answered { dropped["timeout", default: 0] &+= 1 }
            clients[ObjectIdentifier(client.connection)] = nil
            client.connection.close()
        }
        if clients.isEmpty {
            sweepTimer?.close()
            sweepTimer = nil
        }
    }
}
