import Testing
import InkUV
@testable import InkDaemon

@Suite(.serialized) struct MetricsServerTests {
    /// Sends `pieces` as separate writes, reads until the server closes, returns the response.
    func exchange(_ loop: EventLoop, _ server: MetricsServer, _ pieces: [String]) throws -> String? {
        var response: [UInt8] = []
        var finished = false
        var closed = false
        try TCPConnection.connect(loop: loop, to: try #require(server.localAddress)) { result in
            guard let connection = try? result.get() else {
                finished = true
                return
            }
            connection.onClose = { closed = true }
            try? connection.startReading({ response.append(contentsOf: $0) }, onEnd: { _ in
                finished = true
                connection.close()
            })
            for piece in pieces { _ = try? connection.write(Array(piece.utf8)) }
        }
        guard drive(loop, until: { finished && closed }) else { return nil }
        return String(decoding: response, as: UTF8.self)
    }

    func makeServer(_ loop: EventLoop) throws -> (MetricsServer, MetricsRegistry) {
        let registry = MetricsRegistry()
        registry.counter("inkwire_requests_total", help: "Requests.").increment(by: 5)
        let server = try MetricsServer(loop: loop, bindTo: .loopbackIPv4(port: 0), render: registry.render)
        return (server, registry)
    }

    @Test func servesMetrics() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (server, registry) = try makeServer(loop)
        let body = registry.render()
        let response = try exchange(loop, server, ["GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n"])
        #expect(response == "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body)
        // A request split across writes, with a query string, bare newlines.
        let split = try exchange(loop, server, ["GE", "T /metrics?x=1 HTTP/1.0\n", "Host: a\n", "\n"])
        #expect(split?.hasSuffix("\r\n\r\n" + body) == true)
        let head = try exchange(loop, server, ["HEAD /metrics HTTP/1.1\r\n\r\n"])
        #expect(head?.hasPrefix("HTTP/1.1 200 OK\r\n") == true)
        #expect(head?.hasSuffix("Connection: close\r\n\r\n") == true)
        #expect(server.responses == [200: 3])
        server.close()
        loop.runNoWait()
        #expect(loop.openHandleCount == 0)
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found\r\n"),
        ("GET /metricsx HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found\r\n"),
        ("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 405 Method Not Allowed\r\n"),
        ("garbage\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n"),
        ("GET /metrics SPDY/3\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n"),
        ("GET /metrics HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000), "HTTP/1.1 431 Request Header Fields Too Large\r\n"),
    ])
    func refusesOtherRequests(request: String, statusLine: String) throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (server, _) = try makeServer(loop)
        let response = try exchange(loop, server, [request])
        #expect(response?.hasPrefix(statusLine) == true, "\(String(describing: response?.prefix(80)))")
        #expect(response?.contains("Connection: close\r\n") == true)
        if statusLine.contains("405") { #expect(response?.contains("Allow: GET, HEAD\r\n") == true) }
        #expect(response?.contains("inkwire_requests_total") == false)
    }

    /// Clients that connect and say nothing never keep a scrape out: past the bounds a new
    /// connection takes the place of the oldest unanswered one (of its address, then of all),
    /// and silent ones are dropped after `requestTimeoutMicroseconds`.
    @Test func aScrapeAlwaysFindsASlotAmongIdleClients() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (server, _) = try makeServer(loop)
        let address = try #require(server.localAddress)
        var idle: [TCPConnection] = []
        let count = MetricsServer.maximumConnections + 6
        for _ in 0..<count {
            try TCPConnection.connect(loop: loop, to: address) { result in
                if let connection = try? result.get() { idle.append(connection) }
            }
        }
        #expect(drive(loop) { idle.count == count && server.clientCount == MetricsServer.maximumConnectionsPerAddress })
        #expect(server.dropped["evicted"] == UInt64(count - MetricsServer.maximumConnectionsPerAddress))
        let response = try exchange(loop, server, ["GET /metrics HTTP/1.1\r\n\r\n"])
        #expect(response?.hasPrefix("HTTP/1.1 200 OK\r\n") == true)
        // The ones left say nothing: closed once their time to send a request is up.
        let limit = MetricsServer.requestTimeoutMicroseconds + 2 * MetricsServer.sweepIntervalMicroseconds
        #expect(drive(loop, limitMicroseconds: limit + 1_000_000) { server.clientCount == 0 })
        #expect(server.dropped["timeout"] == UInt64(MetricsServer.maximumConnectionsPerAddress - 1))
        for connection in idle { connection.close() }
        server.close()
        loop.runNoWait()
    }

    @Test func parsesRequestHeads() {
        #expect(MetricsServer.requestHead(Array("GET / HTTP/1.1\r\n".utf8)) == nil)
        #expect(MetricsServer.requestHead(Array("GET / HTTP/1.1\r\n\r\nrest".utf8)) == "GET / HTTP/1.1\r\n\r")
        #expect(MetricsServer.requestHead(Array("\n\n".utf8)) == "\n")
        #expect(MetricsServer.requestHead([]) == nil)
    }
}
