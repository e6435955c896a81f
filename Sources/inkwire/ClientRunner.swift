// Drives one ClientSession over a real UDP socket or TCP stream on an InkUV loop.
import Foundation
import InkClient
import InkCrypto
import InkProtocol
import InkUV

/// The IO half of a client command: connects, feeds the session, sends what it produces,
/// re-arms its timer, and hands every event to `onEvent`. The command calls `finish` to stop.
final class ClientRunner {
    /// How long `finish(leaving:)` waits for the goodbye to be acknowledged.
    static let lingerMicroseconds: UInt64 = 300_000
    /// After losing a joined session, how long to keep trying to get it back (daemon restart,
    /// network drop) before giving up with `ClientExit.connectionLost`.
    static let reconnectWindowMicroseconds: UInt64 = 30_000_000
    /// Pause between reconnection attempts.
    static let reconnectPauseMicroseconds: UInt64 = 250_000
    /// After a daemon says it has another key than the pinned one (an unauthenticated notice),
    /// how long a real answer may still come before the join fails with that error.
    static let keyMismatchGraceMicroseconds: UInt64 = 1_000_000

    let command: String
    let options: ClientOptions
    let loop: EventLoop
    let session: ClientSession
    var onEvent: (ClientEvent) -> Void = { _ in }
    private(set) var exitCode: Int32?
    private(set) var hasJoined = false

    /// The server's addresses (a host name may have several, IPv4 and IPv6) and the one in use:
    /// before the join, a refused or failed connection moves on to the next.
    private var addresses: [SocketAddress] = []
    private var addressIndex = 0
    private var serverAddress: SocketAddress { addresses[addressIndex] }
    private var udp: UDPSocket?
    private var tcp: TCPConnection?
    private var transportReady = false
    private let timer: LoopTimer
    private let joinTimer: LoopTimer
    private let reconnectTimer: LoopTimer
    /// Set while the session is lost: give up after this instant.
    private var reconnectDeadline: UInt64?
    private var lingerUntil: UInt64?
    /// Trust on first use: where learned keys are kept, and whether this run learned one.
    private let knownDaemons = KnownDaemons()
    private let pinned: Bool
    /// The key a daemon presented instead of the pinned one (a notice).
    private var presentedKey: [UInt8]?
    private let keyTimer: LoopTimer

    var now: Instant { Instant(microseconds: loop.now) }

    init(_ command: String, options: ClientOptions, configuration: ClientConfiguration) throws {
        self.command = command
        self.options = options
        loop = try EventLoop()
        timer = try LoopTimer(loop: loop)
        joinTimer = try LoopTimer(loop: loop)
        reconnectTimer = try LoopTimer(loop: loop)
        keyTimer = try LoopTimer(loop: loop)
        let transport: ClientTransport = options.server.scheme == .udp
            ? .datagram(connectionID: UInt64.random(in: 1...UInt64.max)) : .stream
        var configuration = configuration
        pinned = configuration.serverKey != nil
        if configuration.serverKey == nil { configuration.serverKey = knownDaemons.key(for: options.server.hostAndPort) }
        session = ClientSession(configuration, transport: transport, crypto: OpenSSLCrypto.shared, now: Instant(microseconds: loop.now))
    }

    /// The error for a daemon that did not prove the key this device expects.
    private func keyError() -> String {
        let expected = session.serverKey.map(PublicKeyText.encode) ?? "?"
        var text = "the daemon at \(options.server) did not prove key \(expected)"
        if let presentedKey { text += " (it presents \(PublicKeyText.encode(presentedKey)))" }
        text += ": a rogue daemon, or the daemon's key was replaced"
        if !pinned, let path = knownDaemons.path { text += "; if it was replaced on purpose, remove its line from \(path)" }
        return text
    }

    /// Connects and runs until `finish`; returns the exit code.
    func run() -> Int32 {
        do { try connect() } catch {
            fail(ClientExit.unreachable, "cannot reach \(options.server): \(error)")
        }
        joinTimer.start(afterMicroseconds: UInt64(options.timeoutSeconds * 1_000_000)) { [unowned self] in
            guard !hasJoined else { return }
            if presentedKey != nil { fail(ClientExit.wrongServerKey, keyError()); return }
            fail(ClientExit.unreachable, "no answer from \(options.server) within \(options.timeoutSeconds) s")
        }
        while exitCode == nil || lingerUntil != nil {
            if let until = lingerUntil, loop.now >= until || session.isLinkIdle { break }
            _ = loop.runOnce()
        }
        loop.shutdown()
        return exitCode ?? ClientExit.failure
    }

    /// Stops with `code`; with `leaving`, says goodbye first and waits briefly for it to go out.
    func finish(_ code: Int32, leaving: Bool = true) {
        guard exitCode == nil else { return }
        exitCode = code
        if leaving && transportReady && hasJoined && !session.hasEnded {
            session.leave()
            lingerUntil = loop.now + ClientRunner.lingerMicroseconds
            timer.start(atMicroseconds: lingerUntil!) {}
            pump()
        }
    }

    func fail(_ code: Int32, _ text: String) {
        guard exitCode == nil else { return }
        printError(command, text)
        finish(code, leaving: false)
    }

    /// Test hook for roaming: moves the UDP session to a new socket (a new source port).
    func rebindUDP() {
        guard options.server.scheme == .udp, let old = udp else { return }
        do {
            try openUDP()
            old.close()
        } catch {
            printError(command, "roam: \(error)")
        }
        pump()
    }

    // MARK: IO

    private func connect() throws {
        if addresses.isEmpty { addresses = try options.server.addresses(loop: loop) }
        switch options.server.scheme {
        case .udp:
            try openUDP()
            pump()
        case .tcp:
            try connectTCP { [unowned self] error in
                if tryNextAddress() { return }
                fail(ClientExit.unreachable, "cannot connect to \(options.server): \(error)")
            }
        }
    }

    /// Opens a TCP stream and starts reading it; `onFailure` when it cannot be opened.
    private func connectTCP(onFailure: @escaping (any Error) -> Void, onConnected: @escaping () -> Void = {}) throws {
        try TCPConnection.connect(loop: loop, to: serverAddress) { [unowned self] result in
            switch result {
            case .failure(let error):
                onFailure(error)
            case .success(let connection):
                tcp = connection
                try? connection.setNoDelay(true)
                // Older kernels lack the option and keep their own backoff (protocol.md 8.2).
                try? connection.setRetransmitCeiling(milliseconds: ClientConfiguration.streamRetransmitCeilingMs)
                do {
                    try connection.startReading({ [unowned self, unowned connection] bytes in
                        guard connection === tcp else { return }
                        session.handleStreamBytes(Array(bytes), now: now)
                        pump()
                    }, onEnd: { [unowned self, unowned connection] error in
                        guard connection === tcp else { return }
                        transportReady = false
                        session.handleTransportClosed(now: now)
                        pump()
                        if exitCode == nil && !hasJoined {
                            fail(ClientExit.unreachable, "\(options.server) closed the connection: \(error.map { "\($0)" } ?? "end of stream")")
                        }
                    })
                } catch {
                    onFailure(error)
                    return
                }
                onConnected()
                transportReady = true
                pump()
            }
        }
    }

    // MARK: reconnection

    /// The joined session was lost: try to get it back until the window passes.
    private func sessionLost(_ reason: String) {
        guard exitCode == nil, !session.hasEnded else { return }
        let nowMicroseconds = loop.now
        if reconnectDeadline == nil {
            reconnectDeadline = nowMicroseconds + ClientRunner.reconnectWindowMicroseconds
            printError(command, "warning: \(reason); reconnecting")
        }
        guard nowMicroseconds < reconnectDeadline! else {
            fail(ClientExit.connectionLost, "lost \(options.server) and could not get the session back: \(reason)")
            return
        }
        reconnectTimer.start(afterMicroseconds: ClientRunner.reconnectPauseMicroseconds) { [unowned self] in reconnectNow() }
    }

    func reconnectNow() {
        guard exitCode == nil else { return }
        switch options.server.scheme {
        case .udp:
            // Same socket, a new ARQ session (new connection id) that joins again.
            session.reconnect(.datagram(connectionID: UInt64.random(in: 1...UInt64.max)), now: now)
            pump()
        case .tcp:
            tcp?.close()
            tcp = nil
            transportReady = false
            do {
                try connectTCP(onFailure: { [unowned self] error in sessionLost("\(error)") },
                               onConnected: { [unowned self] in session.reconnect(.stream, now: now) })
            } catch {
                sessionLost("\(error)")
            }
        }
    }

    private func openUDP() throws {
        let local: SocketAddress = serverAddress.family == .ipv4 ? .anyIPv4(port: 0) : .anyIPv6(port: 0)
        let socket = try UDPSocket(loop: loop, bindTo: local)
        try socket.connect(to: serverAddress)
        socket.onError = { [unowned self] error in udpError(error) }
        try socket.startReceiving { [unowned self] bytes, _ in
            session.handleDatagram(Array(bytes), now: now)
            pump()
        }
        udp = socket
        transportReady = true
    }

    /// Before the join: moves to the server's next address and connects again; false when
    /// every address was tried.
    private func tryNextAddress() -> Bool {
        guard !hasJoined, exitCode == nil, addressIndex + 1 < addresses.count else { return false }
        addressIndex += 1
        udp?.close()
        udp = nil
        tcp?.close()
        tcp = nil
        transportReady = false
        do { try connect() } catch { return tryNextAddress() }
        return true
    }

    private func udpError(_ error: UVError) {
        // An ICMP "port unreachable" before the join means nobody listens there.
        if error.code == UVError.connectionRefused && !hasJoined {
            if tryNextAddress() { return }
            fail(ClientExit.unreachable, "\(options.server): connection refused (is inkwired running?)")
        }
    }

    private var pumping = false
    private var pumpAgain = false

    /// Sends what the session produced, hands events to the command, re-arms the timer.
    /// Re-entrant calls (from `onEvent`) are folded into the running one.
    func pump() {
        if pumping {
            pumpAgain = true
            return
        }
        pumping = true
        defer { pumping = false }
        repeat {
            pumpAgain = false
            pumpOnce()
        } while pumpAgain
    }

    private func pumpOnce() {
        if transportReady {
            while let bytes = session.pollTransmit(now: now) {
                do {
                    if let udp { _ = try udp.send(bytes) } else if let tcp { _ = try tcp.write(bytes) }
                } catch {
                    // UDP: a refused datagram is reported (before the join it is fatal); the ARQ
                    // resends what was lost. TCP: the read side sees the broken stream.
                    if udp != nil { udpError(error) }
                }
            }
        }
        while let e = session.pollEvent() {
            if case .joined = e {
                hasJoined = true
                if reconnectDeadline != nil {
                    reconnectDeadline = nil
                    printError(command, "reconnected to \(options.server)")
                }
            }
            onEvent(e)
        }
        var deadline = session.pollTimeout()?.microseconds
        if let until = lingerUntil { deadline = min(deadline ?? until, until) }
        if let deadline {
            timer.start(atMicroseconds: deadline) { [unowned self] in
                session.handleTimeout(now: now)
                pump()
            }
        } else {
            timer.stop()
        }
    }

    /// Handles the events every command treats alike; returns true when handled.
    func handleCommonEvent(_ e: ClientEvent) -> Bool {
        switch e {
        case .refused(let reason, let text):
            fail(ClientExit.joinRefused, "join refused (\(reason)): \(text)")
        case .goingAway(let reason, let text):
            // A daemon that shuts down may be back soon: the session is lost, not ended.
            if reason != .shuttingDown {
                fail(ClientExit.connectionLost, "the server ended the session (\(reason)): \(text)")
            }
        case .disconnected(let reason):
            if hasJoined {
                sessionLost("disconnected from \(options.server): \(reason)")
            } else if presentedKey != nil || reason.contains("did not prove the pinned key") {
                fail(ClientExit.wrongServerKey, keyError())
            } else {
                fail(ClientExit.unreachable, "disconnected from \(options.server): \(reason)")
            }
        case .sessionReset:
            // The daemon restarted and no longer knows this session: a new one, at once.
            if hasJoined {
                if reconnectDeadline == nil { reconnectDeadline = loop.now + ClientRunner.reconnectWindowMicroseconds }
                printError(command, "warning: \(options.server) restarted; rejoining")
                reconnectNow()
            } else {
                fail(ClientExit.unreachable, "\(options.server) reset the session before the join")
            }
        case .serverKeyLearned(let key):
            let text = PublicKeyText.encode(key)
            let kept = knownDaemons.remember(key, for: options.server.hostAndPort)
            let place = knownDaemons.path.map { kept ? " (kept in \($0))" : " (could not write \($0))" } ?? " (not kept: no home directory)"
            printError(command, "warning: trusting \(options.server)'s key \(text) on first use\(place); pin it with --server-key \(text)")
        case .serverKeyMismatch(_, let presented):
            guard !hasJoined, presentedKey == nil else { return true }
            presentedKey = presented
            keyTimer.start(afterMicroseconds: ClientRunner.keyMismatchGraceMicroseconds) { [unowned self] in
                guard !hasJoined else { return }
                fail(ClientExit.wrongServerKey, keyError())
            }
        case .serverBusy, .established:
            break
        case .protocolError(let text):
            printError(command, "warning: \(text)")
        case .unreachable:
            // UDP: nothing heard for the ARQ's dead-peer time; a new session may get through
            // (the daemon restarted and forgot this one).
            if hasJoined { sessionLost("no answer from \(options.server)") }
        default:
            return false
        }
        return true
    }
}
