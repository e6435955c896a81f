import Glibc
import InkClient
import InkCodec
import InkCrypto
import InkProtocol
import InkUV

/// `inkwire-bench restart [--watchers 7] [--rounds 5] [--gap-ms 200]`: how long UDP devices are
/// offline after the daemon crashes and comes back (docs/protocol.md 8.1, Restart). The real
/// `inkwired` (release, next to this executable) on loopback; one drawer (a batch every 60 ms)
/// and `--watchers` watchers, sealed `ClientSession`s on one loop that rejoin at once on a
/// stateless reset, as `inkwire` does. Each round SIGKILLs the daemon, restarts it on the same
/// port and data directory after `--gap-ms`, and measures, per device, from the new daemon's
/// ready line (its own timestamp) to delivering again: the drawer's first batch acknowledged,
/// each watcher's first batch received, after the restart.
func runRestartBench(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "restart", usage: "usage: inkwire-bench restart [--watchers 7] [--rounds 5] [--gap-ms 200]",
                                    options: ["--watchers", "--rounds", "--gap-ms"])
    let watchers = cli.integer("--watchers", 1...1000, default: 7)
    let rounds = cli.integer("--rounds", 1...1000, default: 5)
    let gapMs = cli.integer("--gap-ms", UInt64(0)...600_000, default: 200)
    do {
        let results = try RestartBench(watchers: watchers).run(rounds: rounds, gapMs: gapMs)
        let all = results.flatMap { $0 }.sorted()
        let p50 = all.isEmpty ? 0 : all[all.count / 2]
        let worst = all.last ?? 0
        print("{\"bench\":\"restart\",\"devices\":\(watchers + 1),\"rounds\":\(rounds),\"gap_ms\":\(gapMs),"
            + "\"delivering_again_p50_ms\":\(p50),\"delivering_again_max_ms\":\(worst),\"within_1s\":\(all.filter { $0 <= 1000 }.count),\"samples\":\(all.count)}")
        print("")
        print("| round | drawer ms | watchers ms (min / max) |")
        print("| --- | --- | --- |")
        for (r, row) in results.enumerated() {
            let w = row.dropFirst()
            print("| \(r + 1) | \(row.first ?? 0) | \(w.min() ?? 0) / \(w.max() ?? 0) |")
        }
        exit(worst <= 1000 ? 0 : 1)
    } catch {
        print("inkwire-bench restart: \(error)")
        exit(1)
    }
}

/// One sealed UDP device of the restart run.
private final class RestartDevice {
    let session: ClientSession
    let socket: UDPSocket
    let timer: LoopTimer
    let loop: EventLoop
    /// Wall-clock ms of the first acknowledgement (drawer) or delivery (watcher) since `mark`.
    var deliveredAt: UInt64?
    var armed = false

    init(loop: EventLoop, server: SocketAddress, key: [UInt8], user: String, role: MemberRole, origin: UInt64) throws {
        self.loop = loop
        socket = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try socket.connect(to: server)
        timer = try LoopTimer(loop: loop)
        session = ClientSession(ClientConfiguration(room: "restart", user: user, role: role, origin: origin, serverKey: key),
                                transport: .datagram(connectionID: UInt64.random(in: 1...UInt64.max)), crypto: OpenSSLCrypto.shared,
                                now: Instant(microseconds: loop.now))
        try socket.startReceiving { [unowned self] bytes, _ in
            session.handleDatagram(Array(bytes), now: Instant(microseconds: self.loop.now))
            pump()
        }
        pump()
    }

    var now: Instant { Instant(microseconds: loop.now) }

    func pump() {
        while let d = session.pollTransmit(now: now) { _ = try? socket.send(d) }
        while let e = session.pollEvent() {
            switch e {
            case .acknowledged, .delivered:
                if armed && deliveredAt == nil { deliveredAt = FanoutDaemon.wallMillisecondsNow() }
            case .sessionReset, .disconnected, .unreachable:
                // As `inkwire` does: a new session at once (the daemon restarted).
                session.reconnect(.datagram(connectionID: UInt64.random(in: 1...UInt64.max)), now: now)
            case .goingAway(let reason, _) where reason == .shuttingDown:
                session.reconnect(.datagram(connectionID: UInt64.random(in: 1...UInt64.max)), now: now)
            default:
                break
            }
        }
        while let d = session.pollTransmit(now: now) { _ = try? socket.send(d) }
        if let t = session.pollTimeout() {
            timer.start(atMicroseconds: max(t.microseconds, loop.now)) { [unowned self] in
                session.handleTimeout(now: self.now)
                pump()
            }
        }
    }
}

private final class RestartBench {
    let watchers: Int
    init(watchers: Int) { self.watchers = watchers }

    /// Per round: the drawer's delay, then each watcher's, in ms after the ready line.
    func run(rounds: Int, gapMs: UInt64) throws -> [[UInt64]] {
        let loop = try EventLoop()
        var daemon = try FanoutDaemon(sessions: watchers + 1, rooms: 1, members: watchers + 1)
        let port = daemon.udp.port
        let key = daemon.publicKey
        let drawer = try RestartDevice(loop: loop, server: daemon.udp, key: key, user: "teacher", role: .teacher, origin: 1)
        var devices = [drawer]
        for w in 0..<watchers {
            devices.append(try RestartDevice(loop: loop, server: daemon.udp, key: key, user: "w\(w)", role: .viewer, origin: UInt64(2 + w)))
        }
        var stroke: UInt32 = 0
        let ticker = try LoopTimer(loop: loop)
        ticker.start(afterMicroseconds: 60_000, repeatingEveryMicroseconds: 60_000) {
            stroke += 1
            let id = StrokeID(stroke)
            let commands = [TimedCommand(timeMs: UInt64(stroke) * 60, command: .point(StrokePoint(stroke: id, phase: .start, x: Int32(stroke), y: 1))),
                            TimedCommand(timeMs: UInt64(stroke) * 60, command: .point(StrokePoint(stroke: id, phase: .end, x: Int32(stroke), y: 2)))]
            _ = try? drawer.session.send(commands, now: drawer.now)
            drawer.pump()
        }
        func run(microseconds: UInt64) {
            let end = loop.now + microseconds
            while loop.now < end { _ = loop.runOnce() }
        }
        run(microseconds: 3_000_000)
        guard devices.allSatisfy({ $0.session.isJoined }) else { throw FanoutDaemon.StartFailure(description: "devices did not join") }
        var results: [[UInt64]] = []
        for round in 0..<rounds {
            // Past the daemon's once-a-second save of its sessions.
            run(microseconds: 1_500_000)
            daemon.crash()
            run(microseconds: gapMs * 1000)
            for d in devices {
                d.armed = true
                d.deliveredAt = nil
            }
            daemon = try FanoutDaemon(sessions: watchers + 1, rooms: 1, members: watchers + 1, directory: daemon.directory, udpAddress: "127.0.0.1:\(port)")
            let ready = daemon.readyWallMilliseconds
            let limit = loop.now + 10_000_000
            while loop.now < limit && devices.contains(where: { $0.deliveredAt == nil }) { _ = loop.runOnce() }
            let row = devices.map { d in d.deliveredAt.map { $0 >= ready ? $0 - ready : 0 } ?? 10_000 }
            print("{\"bench\":\"restart-round\",\"round\":\(round + 1),\"drawer_ms\":\(row[0]),\"watchers_ms\":[\(row.dropFirst().map(String.init).joined(separator: ","))]}")
            fflush(nil)
            results.append(row)
            for d in devices { d.armed = false }
        }
        ticker.close()
        daemon.stop()
        return results
    }
}
