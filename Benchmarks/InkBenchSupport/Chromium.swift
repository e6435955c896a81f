import Foundation
import Glibc
import InkWeb

/// Debian's headless Chromium, started for a test or benchmark on loopback and driven through
/// its DevTools protocol (`DevToolsClient`). Its profile lives in a fresh directory removed at
/// the end; it is killed when this object goes.
public final class Chromium {
    public let pid: pid_t
    public let profile: String
    public let devTools: DevToolsClient
    private var exited = false

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The chromium binary, or nil when it is not installed (tests then skip).
    public static var binary: String? {
        for path in ["/usr/bin/chromium", "/usr/lib/chromium/chromium"] where access(path, X_OK) == 0 { return path }
        return nil
    }

    /// Starts headless Chromium. `home` is the HOME it runs with (its NSS certificate store,
    /// `~/.pki/nssdb`, lives there); `extraArguments` are added as they are.
    public init(home: String? = nil, extraArguments: [String] = [], windowSize: (Int, Int) = (1100, 900)) throws {
        guard let binary = Chromium.binary else { throw Failure("chromium is not installed") }
        var template = Array("/tmp/inkwire-chromium-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { throw Failure("mkdtemp failed") }
        profile = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let arguments = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--metrics-recording-only",
                         "--disable-extensions", "--mute-audio", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                         "--user-data-dir=\(profile)", "--window-size=\(windowSize.0),\(windowSize.1)"] + extraArguments + ["about:blank"]
        var environment = ProcessInfo.processInfo.environment
        if let home { environment["HOME"] = home }
        let log = profile + "/chromium.log"
        pid = try Chromium.spawn(arguments, environment: environment, log: log)
        // Chromium writes the DevTools port and browser endpoint to DevToolsActivePort.
        let deadline = Date().addingTimeInterval(20)
        var endpoint: (UInt16, String)?
        while endpoint == nil && Date() < deadline {
            if let text = try? String(contentsOfFile: profile + "/DevToolsActivePort", encoding: .utf8) {
                let lines = text.split(separator: "\n")
                if lines.count >= 2, let port = UInt16(lines[0]) { endpoint = (port, String(lines[1])) }
            }
            if endpoint == nil { usleep(50_000) }
        }
        guard let (port, path) = endpoint else {
            kill(pid, SIGKILL)
            throw Failure("chromium did not start: \((try? String(contentsOfFile: log, encoding: .utf8))?.suffix(2000) ?? "")")
        }
        devTools = try DevToolsClient(port: port, path: path)
    }

    deinit { quit() }

    /// Ends the browser and removes its profile.
    public func quit() {
        guard !exited else { return }
        exited = true
        devTools.close()
        kill(pid, SIGTERM)
        var status: Int32 = 0
        var reaped = false
        for _ in 0..<40 where !reaped {
            reaped = waitpid(pid, &status, WNOHANG) == pid
            if !reaped { usleep(50_000) }
        }
        // Only a child not yet reaped may be killed (a reaped pid can belong to another process).
        if !reaped {
            kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
        }
        if profile.hasPrefix("/tmp/inkwire-chromium-") { _ = try? FileManager.default.removeItem(atPath: profile) }
    }

    /// A new window at `url` (its own, so it is visible and runs animation frames), with the
    /// DevTools session attached to it.
    public func open(_ url: String) throws -> BrowserPage {
        let created = try devTools.call("Target.createTarget", ["url": "about:blank", "newWindow": true])
        guard let target = created["targetId"] as? String else { throw Failure("Target.createTarget: \(created)") }
        let attached = try devTools.call("Target.attachToTarget", ["targetId": target, "flatten": true])
        guard let session = attached["sessionId"] as? String else { throw Failure("Target.attachToTarget: \(attached)") }
        let page = BrowserPage(devTools: devTools, session: session, target: target)
        _ = try page.call("Page.enable")
        _ = try page.call("Runtime.enable")
        if !url.isEmpty { try page.navigate(url) }
        return page
    }

    private static func spawn(_ argv: [String], environment: [String: String], log: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid: pid_t = 0
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in cArgs { free(p) }
            for p in cEnv { free(p) }
        }
        let rc = posix_spawn(&pid, argv[0], &actions, nil, cArgs, cEnv)
        guard rc == 0 else { throw Failure("posix_spawn \(argv[0]): \(String(cString: strerror(rc)))") }
        return pid
    }
}

/// One tab, driven through the browser's DevTools session for it.
public final class BrowserPage {
    let devTools: DevToolsClient
    public let session: String
    public let target: String

    init(devTools: DevToolsClient, session: String, target: String) {
        self.devTools = devTools
        self.session = session
        self.target = target
    }

    @discardableResult
    public func call(_ method: String, _ params: [String: Any] = [:], timeout: TimeInterval = 30) throws -> [String: Any] {
        try devTools.call(method, params, session: session, timeout: timeout)
    }

    public func navigate(_ url: String) throws {
        try call("Page.navigate", ["url": url])
    }

    /// The value of a JavaScript expression (promises awaited), as JSON values.
    public func evaluate(_ expression: String, timeout: TimeInterval = 30) throws -> Any? {
        let result = try call("Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true], timeout: timeout)
        if let exception = result["exceptionDetails"] as? [String: Any] {
            let text = ((exception["exception"] as? [String: Any])?["description"] as? String) ?? "\(exception)"
            throw Chromium.Failure("evaluating \(expression.prefix(80)): \(text)")
        }
        return (result["result"] as? [String: Any])?["value"]
    }

    /// Waits until `condition` (a JavaScript expression) is true; false on time-out.
    @discardableResult
    public func wait(for condition: String, timeout: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? evaluate("Boolean(\(condition))", timeout: 5)) as? Bool == true { return true }
            usleep(20_000)
        }
        return false
    }

    /// Makes this tab the visible one (a hidden tab runs no animation frames).
    public func bringToFront() throws {
        try call("Page.bringToFront")
    }

    /// A mouse event at page coordinates (CSS pixels): `mousePressed`, `mouseMoved`, `mouseReleased`.
    /// Chromium turns them into the pointer events the page draws with.
    public func mouse(_ type: String, x: Double, y: Double) throws {
        var params: [String: Any] = ["type": type, "x": x, "y": y, "button": "left", "pointerType": "mouse"]
        params["buttons"] = type == "mouseReleased" ? 0 : 1
        if type != "mouseMoved" { params["clickCount"] = 1 }
        try call("Input.dispatchMouseEvent", params)
    }

    /// A PNG screenshot of the viewport.
    public func screenshot() throws -> Data {
        let result = try call("Page.captureScreenshot", ["format": "png"])
        guard let base64 = result["data"] as? String, let data = Data(base64Encoded: base64) else {
            throw Chromium.Failure("Page.captureScreenshot gave no image")
        }
        return data
    }

    public func close() {
        _ = try? devTools.call("Target.closeTarget", ["targetId": target])
    }
}

/// The Chrome DevTools protocol over its WebSocket (InkWeb's client role): JSON requests with
/// ids, answers matched to them; events are kept in order for `events(named:)`.
public final class DevToolsClient {
    private let fd: Int32
    private var socket = WebSocketConnection(role: .client, limits: WebSocketLimits(maxMessageBytes: 256 << 20, maxFragments: 1 << 16),
                                             mask: { (UInt8.random(in: 0...255), UInt8.random(in: 0...255), UInt8.random(in: 0...255), UInt8.random(in: 0...255)) })
    private var nextID = 1
    private var answers: [Int: [String: Any]] = [:]
    /// Events received, oldest first: (method, session, params).
    public private(set) var events: [(method: String, session: String?, params: [String: Any])] = []
    private var closed = false

    init(port: UInt16, path: String) throws {
        fd = socket_(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Chromium.Failure("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { throw Chromium.Failure("connect to DevTools port \(port) failed") }
        let key = Base64.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        try writeAll(Array(request.utf8))
        var head: [UInt8] = []
        while true {
            let chunk = try readSome(timeout: 10)
            head += chunk
            if let end = (try? HTTPRequestHead.end(in: head)) ?? nil {
                let status = String(decoding: head[..<min(end, 12)], as: UTF8.self)
                guard status.hasPrefix("HTTP/1.1 101") else { throw Chromium.Failure("DevTools upgrade refused: \(String(decoding: head, as: UTF8.self))") }
                socket.handleBytes(Array(head[end...]))
                break
            }
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// Calls a method (on the browser, or on a page's session) and waits for its result.
    public func call(_ method: String, _ params: [String: Any] = [:], session: String? = nil, timeout: TimeInterval = 30) throws -> [String: Any] {
        let id = nextID
        nextID += 1
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if let session { message["sessionId"] = session }
        let data = try JSONSerialization.data(withJSONObject: message)
        socket.sendText(String(decoding: data, as: UTF8.self))
        if let out = socket.pollTransmit() { try writeAll(out) }
        let deadline = Date().addingTimeInterval(timeout)
        while answers[id] == nil {
            guard Date() < deadline else { throw Chromium.Failure("\(method): no answer within \(timeout) s") }
            try receive(timeout: max(0.01, deadline.timeIntervalSinceNow))
        }
        let answer = answers.removeValue(forKey: id)!
        if let error = answer["error"] as? [String: Any] { throw Chromium.Failure("\(method): \(error["message"] ?? error)") }
        return answer["result"] as? [String: Any] ?? [:]
    }

    /// Events of `method` received so far (and removes them).
    public func takeEvents(named method: String) -> [[String: Any]] {
        let taken = events.filter { $0.method == method }.map(\.params)
        events.removeAll { $0.method == method }
        return taken
    }

    private func receive(timeout: TimeInterval) throws {
        let bytes = try readSome(timeout: timeout)
        socket.handleBytes(bytes)
        while let event = socket.pollEvent() {
            switch event {
            case .text(let text):
                guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { continue }
                if let id = object["id"] as? Int {
                    answers[id] = object
                } else if let method = object["method"] as? String {
                    events.append((method, object["sessionId"] as? String, object["params"] as? [String: Any] ?? [:]))
                    if events.count > 10_000 { events.removeFirst(5_000) }
                }
            case .closed(_, let reason, _):
                throw Chromium.Failure("DevTools socket closed: \(reason)")
            case .message, .pong:
                break
            }
        }
        if let out = socket.pollTransmit() { try writeAll(out) }
    }

    private func readSome(timeout: TimeInterval) throws -> [UInt8] {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, Int32(max(1, timeout * 1000)))
        guard ready > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { throw Chromium.Failure("DevTools connection ended") }
        return Array(buffer[..<n])
    }

    private func writeAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Chromium.Failure("DevTools write failed") }
            offset += n
        }
    }
}

private func socket_(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 { socket(domain, type, proto) }
