// HYWhiteboard app models (LegacyAppModel) on real TCP sockets: the fixture of the end-to-end
// tests and the live legacy benchmark.
import Glibc
import InkCodec
import InkProtocol
import InkSim
import LegacyAppModel

/// Runs app models on real sockets with one poll loop on the caller's thread. Each app reads at
/// most 1030 bytes at a time, after a random pause once bytes are waiting (the read pacing of a
/// busy device), sends every write its model makes, and performs its script in real time.
/// Apps connect out (client mode: the user typed `IP PORT`) or listen (server mode: one client
/// at a time; a new connection gets a new whiteboard screen, as the app pushes a new one). A
/// server-mode app may listen on an upload port too (the app's 57777): one upload connection at
/// a time, read the same way, into the app's `HYUploadManager`, whose images the screen of the
/// board connection shows; a second connection meanwhile is accepted but never read or closed
/// (the app's accept callback returns without taking it).
public final class LegacyAppRunner {
    public final class App: CustomStringConvertible {
        public let name: String
        /// The app now; a server-mode app gets a new one for each connection (`sessions`).
        public internal(set) var model: HYWhiteboardApp
        /// Every connection's app, oldest first (one for a client-mode app).
        public internal(set) var sessions: [HYWhiteboardApp]
        public var script: LegacyTraceScript?
        let configuration: HYWhiteboardApp.Configuration
        var fd: Int32 = -1
        var listener: Int32 = -1
        var outgoing: [UInt8] = []
        var readAt: UInt64?
        /// When its socket was last seen with nothing to read.
        var quietSince: UInt64 = 0
        /// The app's own time: the latest event it handled.
        var clock: UInt64 = 0
        public internal(set) var listeningPort: UInt16 = 0
        /// Server mode with an upload port: the app's one `HYUploadManager`, its listener, the
        /// upload connection open now, and connections accepted past its one-client limit.
        public let uploads = HYUploadManager(decode: HYUploadManager.imageIO)
        public internal(set) var uploadPort: UInt16 = 0
        var uploadListener: Int32 = -1
        var upload: UploadLink?
        /// Whether an upload connection is open (the client-mode app's button is disabled meanwhile).
        public var isUploading: Bool { upload != nil }
        var parked: [Int32] = []
        /// Every upload connection's model, oldest first.
        public internal(set) var uploadConnections: [HYUploadConnection] = []

        init(name: String, configuration: HYWhiteboardApp.Configuration) {
            self.name = name
            self.configuration = configuration
            model = HYWhiteboardApp(configuration: configuration)
            sessions = [model]
        }

        func fresh() {
            model = HYWhiteboardApp(configuration: configuration)
            sessions.append(model)
        }

        public var isConnected: Bool { fd >= 0 && model.state == .connected }

        /// `viewWillDisappear`: the screen whose board connection went unsets itself as the
        /// upload manager's delegate and disconnects the upload connection.
        func screenChanged() {
            uploads.screen = model.takesImages ? model : nil
            if let link = upload, model.isScreenUp, !model.takesImages { link.connection.close("the whiteboard screen went") }
        }

        public var description: String {
            "\(name): \(model.state), \(model.screen), desync \(model.desync ?? "none"), touches ignored \(model.touchesIgnored), frames dropped before the screen \(model.framesDropped)"
                + (model.background.map { ", background \($0.width)x\($0.height) of \($0.bytes.count) bytes" } ?? "")
        }
    }

    /// One upload connection of a server-mode app.
    final class UploadLink {
        let fd: Int32
        let connection: HYUploadConnection
        var readAt: UInt64?
        var quietSince: UInt64
        var clock: UInt64 = 0
        var outgoing: [UInt8] = []
        init(fd: Int32, connection: HYUploadConnection, now: UInt64) {
            self.fd = fd
            self.connection = connection
            quietSince = now
        }
    }

    public struct Pacing: Sendable {
        /// Pause before each read: up to `pauseMicroseconds`, with `stallPercent` up to `stallMicroseconds`.
        public var pauseMicroseconds: UInt64 = 3_000
        public var stallPercent: UInt64 = 2
        public var stallMicroseconds: UInt64 = 60_000
        public init() {}
    }

    public private(set) var apps: [App] = []
    public var pacing = Pacing()
    private var rng: SimRandom

    public init(seed: UInt64) { rng = SimRandom(seed: seed) }

    deinit {
        for app in apps {
            if app.fd >= 0 { Glibc.close(app.fd) }
            if app.listener >= 0 { Glibc.close(app.listener) }
            closeUploads(app)
        }
    }

    private func closeUploads(_ app: App) {
        if let link = app.upload { Glibc.close(link.fd) }
        app.upload = nil
        for fd in app.parked { Glibc.close(fd) }
        app.parked = []
        if app.uploadListener >= 0 { Glibc.close(app.uploadListener) }
        app.uploadListener = -1
    }

    /// The monotonic clock, as the models' `now`.
    public var now: Instant {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Instant(microseconds: UInt64(t.tv_sec) * 1_000_000 + UInt64(t.tv_nsec) / 1000)
    }

    public struct SocketError: Error, CustomStringConvertible {
        public let description: String
    }

    /// An app in client mode connected to 127.0.0.1:`port` (`ipv6`: from and to [::1]), from
    /// another loopback address when `source` is given ("127.0.0.3": another iPad on the LAN).
    @discardableResult
    public func connect(_ name: String, port: UInt16, ipv6: Bool = false, from source: String? = nil,
                        configuration: HYWhiteboardApp.Configuration = .init()) throws -> App {
        var config = configuration
        config.mode = .client
        let app = App(name: name, configuration: config)
        app.fd = try LegacyAppRunner.connectLoopback(port: port, ipv6: ipv6, from: source)
        apps.append(app)
        app.quietSince = now.microseconds
        app.model.handleConnected(now: now)
        return app
    }

    /// An app in server mode listening on 127.0.0.1:`port` (0: any; see `listeningPort`), and
    /// with `uploadPort` on its upload port too (0: any; see `uploadPort`; the app's is 57777).
    @discardableResult
    public func listen(_ name: String, port: UInt16 = 0, uploadPort: UInt16? = nil, configuration: HYWhiteboardApp.Configuration = .init()) throws -> App {
        var config = configuration
        config.mode = .server
        let app = App(name: name, configuration: config)
        try openListener(app, port: port)
        if let uploadPort {
            let (fd, bound) = try LegacyAppRunner.listenLoopback(port: uploadPort, backlog: 4)
            app.uploadListener = fd
            app.uploadPort = bound
        }
        apps.append(app)
        return app
    }

    /// Closes a server-mode app's connection and listener (the app quits), then listens again on
    /// the same port with a new screen (it is started again).
    public func restart(_ app: App) throws {
        let port = app.listeningPort
        let uploadPort = app.uploadListener >= 0 ? app.uploadPort : nil
        if app.fd >= 0 { Glibc.close(app.fd); app.fd = -1 }
        if app.listener >= 0 { Glibc.close(app.listener); app.listener = -1 }
        app.model.handlePeerClosed(now: now)
        app.upload?.connection.close("the app quit")
        closeUploads(app)
        app.fresh()
        if let uploadPort {
            let deadline = now.microseconds + 5_000_000
            while true {
                do {
                    (app.uploadListener, app.uploadPort) = try LegacyAppRunner.listenLoopback(port: uploadPort, backlog: 4)
                    break
                } catch {
                    if now.microseconds > deadline { throw error }
                    run(limitMicroseconds: 20_000)
                }
            }
        }
        // The closed connection holds the port until the relay closes its side too.
        let deadline = now.microseconds + 5_000_000
        while true {
            do {
                try openListener(app, port: port)
                return
            } catch {
                if now.microseconds > deadline { throw error }
                run(limitMicroseconds: 20_000)
            }
        }
    }

    /// A client-mode app's user inserts an image (`插入图片`): the app connects to 127.0.0.1:`port`
    /// (the host's 57777), uploads `image` and shows it itself; false while its last upload
    /// connection is still open (the button stays disabled until it closes).
    @discardableResult
    public func insertImage(_ app: App, image: [UInt8], port: UInt16) throws -> Bool {
        guard app.upload == nil, app.model.takesImages else { return false }
        let fd = try LegacyAppRunner.connectLoopback(port: port)
        openUpload(app, fd: fd) { $0.sendImage(image) }
        return true
    }

    /// Closes an app's connection (its user leaves the whiteboard).
    public func disconnect(_ app: App) {
        if app.fd >= 0 { Glibc.close(app.fd); app.fd = -1 }
        app.model.handlePeerClosed(now: now)
        app.screenChanged()
        closeUploadIfDone(app)
    }

    /// Runs until `done` holds or `limitMicroseconds` pass.
    @discardableResult
    public func run(limitMicroseconds: UInt64, until done: () -> Bool = { false }) -> Bool {
        let deadline = now.microseconds + limitMicroseconds
        while now.microseconds < deadline {
            if done() { return true }
            step(deadline: deadline)
        }
        return done()
    }

    /// One turn: every app event that is due, in time order (a turn that started late, on a
    /// busy machine, still reads what arrived before the touches it is late with), then a
    /// poll for the next socket event or deadline.
    private func step(deadline: UInt64) {
        let t = now.microseconds
        for app in apps where app.fd >= 0 && app.readAt == nil {
            var probe = pollfd(fd: app.fd, events: Int16(POLLIN), revents: 0)
            if poll(&probe, 1, 0) > 0 {
                // It arrived at the earliest after the last look that saw nothing.
                app.readAt = app.quietSince + pause()
            } else {
                app.quietSince = t
            }
        }
        for app in apps where app.upload?.outgoing.isEmpty == false { flushUpload(app) }
        for app in apps {
            guard let link = app.upload, link.readAt == nil else { continue }
            var probe = pollfd(fd: link.fd, events: Int16(POLLIN), revents: 0)
            if poll(&probe, 1, 0) > 0 { link.readAt = link.quietSince + pause() } else { link.quietSince = t }
        }
        while let (app, kind, at) = nextEvent(), at <= t {
            if kind == .uploadRead || kind == .uploadTimer {
                guard let link = app.upload else { continue }
                let when = Instant(microseconds: max(at, link.clock, app.clock))
                link.clock = when.microseconds
                app.screenChanged()
                if kind == .uploadRead { readUpload(app, link, now: when) } else { link.connection.handleTimeout(now: when) }
                while let w = link.connection.pollWrite() { link.outgoing.append(contentsOf: w) }
                flushUpload(app)
                continue
            }
            let when = Instant(microseconds: max(at, app.clock))
            app.clock = when.microseconds
            switch kind {
            case .read: read(app, now: when)
            case .timer: app.model.handleTimeout(now: when)
            case .script: app.script?.perform(on: app.model, now: when)
            case .uploadRead, .uploadTimer: break
            }
            while let w = app.model.pollWrite() { app.outgoing.append(contentsOf: w) }
            flush(app)
            app.screenChanged()
            closeUploadIfDone(app)
        }
        // Sleep until the next deadline or socket event.
        var next = deadline
        if let (_, _, at) = nextEvent() { next = min(next, at) }
        var fds: [pollfd] = []
        var owners: [(App, PollOwner)] = []
        for app in apps {
            if app.fd >= 0 && app.readAt == nil {
                fds.append(pollfd(fd: app.fd, events: Int16(POLLIN), revents: 0))
                owners.append((app, .board))
            }
            if app.listener >= 0 && app.fd < 0 {
                fds.append(pollfd(fd: app.listener, events: Int16(POLLIN), revents: 0))
                owners.append((app, .listener))
            }
            if app.uploadListener >= 0 {
                fds.append(pollfd(fd: app.uploadListener, events: Int16(POLLIN), revents: 0))
                owners.append((app, .uploadListener))
            }
            if let link = app.upload, link.readAt == nil {
                fds.append(pollfd(fd: link.fd, events: Int16(POLLIN), revents: 0))
                owners.append((app, .upload))
            }
        }
        let current = now.microseconds
        // An upload the socket did not take whole is sent on within a millisecond.
        let sending = apps.contains { $0.upload?.outgoing.isEmpty == false }
        let wait = next > current ? Int32(min((next - current + 999) / 1000, sending ? 1 : 50)) : 0
        guard poll(&fds, nfds_t(fds.count), wait) > 0 else { return }
        for (i, (app, what)) in owners.enumerated() where fds[i].revents != 0 {
            switch what {
            case .listener: accept(app)
            case .board: app.readAt = now.microseconds + pause()
            case .uploadListener: acceptUpload(app)
            case .upload: app.upload?.readAt = now.microseconds + pause()
            }
        }
    }

    private enum EventKind { case read, timer, script, uploadRead, uploadTimer }
    private enum PollOwner { case listener, board, uploadListener, upload }

    private func nextEvent() -> (App, EventKind, UInt64)? {
        var best: (App, EventKind, UInt64)?
        func consider(_ app: App, _ kind: EventKind, _ at: UInt64?) {
            if let at, best == nil || at < best!.2 { best = (app, kind, at) }
        }
        for app in apps {
            consider(app, .read, app.readAt)
            consider(app, .timer, app.model.pollTimeout()?.microseconds)
            if app.model.isScreenUp { consider(app, .script, app.script?.nextAt?.microseconds) }
            if let link = app.upload {
                consider(app, .uploadRead, link.readAt)
                consider(app, .uploadTimer, link.connection.pollTimeout()?.microseconds)
            }
        }
        return best
    }

    private func readUpload(_ app: App, _ link: UploadLink, now t: Instant) {
        link.readAt = nil
        link.quietSince = t.microseconds
        var buffer = [UInt8](repeating: 0, count: HYReceiver.readBytes)
        let n = recv(link.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if n > 0 {
            link.connection.handleRead(Array(buffer[..<n]), now: t)
            guard link.connection.isOpen else { return }
            var probe = pollfd(fd: link.fd, events: Int16(POLLIN), revents: 0)
            if poll(&probe, 1, 0) > 0 { link.readAt = t.microseconds + pause() }
        } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            link.connection.handlePeerClosed()
        }
    }

    private func flushUpload(_ app: App) {
        guard let link = app.upload else { return }
        while link.connection.isOpen && !link.outgoing.isEmpty {
            let n = link.outgoing.withUnsafeBytes { Glibc.send(link.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if n > 0 { link.outgoing.removeFirst(n) } else { break }
        }
        closeUploadIfDone(app)
    }

    /// The app closed its upload connection (`disconnectService`): the socket goes, and the
    /// server's client list has room for the next one.
    private func closeUploadIfDone(_ app: App) {
        guard let link = app.upload, !link.connection.isOpen else { return }
        Glibc.close(link.fd)
        app.upload = nil
    }

    private func acceptUpload(_ app: App) {
        let fd = Glibc.accept(app.uploadListener, nil, nil)
        guard fd >= 0 else { return }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        guard app.upload == nil else {
            // `clientList.count >= clientlimit`: the callback returns, the socket stays open, unread.
            app.parked.append(fd)
            return
        }
        openUpload(app, fd: fd)
    }

    /// Makes `fd` the app's one upload connection (either side of it), lets `start` act on it,
    /// and writes what it has to send.
    private func openUpload(_ app: App, fd: Int32, start: (HYUploadConnection) -> Void = { _ in }) {
        let t = now
        let connection = HYUploadConnection(manager: app.uploads, configuration: app.configuration, now: t)
        app.uploadConnections.append(connection)
        let link = UploadLink(fd: fd, connection: connection, now: t.microseconds)
        app.upload = link
        app.screenChanged()
        start(connection)
        while let w = connection.pollWrite() { link.outgoing.append(contentsOf: w) }
        flushUpload(app)
    }

    private func read(_ app: App, now t: Instant) {
        app.readAt = nil
        app.quietSince = t.microseconds
        guard app.fd >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: HYReceiver.readBytes)
        let n = recv(app.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if n > 0 {
            app.model.handleRead(Array(buffer[..<n]), now: t)
            if !app.model.isRunning { Glibc.close(app.fd); app.fd = -1; return }
            // More may be waiting: the app reads again on its next turn.
            var probe = pollfd(fd: app.fd, events: Int16(POLLIN), revents: 0)
            if poll(&probe, 1, 0) > 0 { app.readAt = t.microseconds + pause() }
        } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            Glibc.close(app.fd)
            app.fd = -1
            app.model.handlePeerClosed(now: t)
        }
    }

    private func flush(_ app: App) {
        if !app.model.isRunning && app.fd >= 0 {
            // The app dropped the link (its liveness check) or crashed.
            Glibc.close(app.fd)
            app.fd = -1
            return
        }
        while app.fd >= 0 && !app.outgoing.isEmpty {
            let n = app.outgoing.withUnsafeBytes { Glibc.send(app.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if n > 0 { app.outgoing.removeFirst(n) } else { break }
        }
    }

    private func accept(_ app: App) {
        let fd = Glibc.accept(app.listener, nil, nil)
        guard fd >= 0 else { return }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        app.screenChanged()
        closeUploadIfDone(app)
        if app.model.state != .notConnected { app.fresh() }
        app.fd = fd
        app.outgoing = []
        app.quietSince = now.microseconds
        app.model.handleConnected(now: now)
    }

    private func pause() -> UInt64 {
        if rng.below(100) < pacing.stallPercent { return rng.below(pacing.stallMicroseconds + 1) }
        return rng.below(pacing.pauseMicroseconds + 1)
    }

    private func openListener(_ app: App, port: UInt16) throws {
        let (fd, bound) = try LegacyAppRunner.listenLoopback(port: port, backlog: 1)
        app.listener = fd
        app.listeningPort = bound
    }

    /// A listening TCP socket on 127.0.0.1:`port` (0: any) and its port.
    static func listenLoopback(port: UInt16, backlog: Int32) throws -> (Int32, UInt16) {
        // Close-on-exec: a daemon the test starts must not inherit the app's port.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError(description: "socket failed") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // One client: the app's server accepts one at a time (`clientLimit: 1`).
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            Glibc.close(fd)
            throw SocketError(description: "listen on 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { p in
            _ = p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// A TCP connection to 127.0.0.1:`port` (from the IPv4 address `source`, if given), or
    /// [::1]:`port`.
    public static func connectLoopback(port: UInt16, ipv6: Bool = false, from source: String? = nil) throws -> Int32 {
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError(description: "socket failed") }
        if let source, !ipv6 {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            let bound = inet_pton(AF_INET, source, &local.sin_addr) == 1 && withUnsafePointer(to: &local) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            guard bound else {
                Glibc.close(fd)
                throw SocketError(description: "bind \(source): \(String(cString: strerror(errno)))")
            }
        }
        let rc: Int32
        if ipv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &address.sin6_addr) { $0[15] = 1 }
            rc = withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            rc = withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard rc == 0 else {
            Glibc.close(fd)
            throw SocketError(description: "connect \(ipv6 ? "[::1]" : "127.0.0.1"):\(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }
}
