import Foundation
import Glibc
import InkUV

/// One kcptun setting the loss bench compares: kcptun's `--mode` profile and whether its
/// Reed-Solomon FEC is on (kcptun's shipped 10 data + 3 parity shards) or off (0 + 0, which
/// kcp-go takes as no FEC layer at all, not even its header).
///
/// Everything else is kcptun's default except two settings that only cost bytes here:
/// `--crypt none` (the shipped `aes` with the built-in key adds 20 B a packet, a nonce and a
/// checksum, and protects nothing; inkwired's native sessions are not sealed either) and
/// `--nocomp` (the payload is already the compact binary codec; snappy's stream framing adds
/// 8 B or more to each write). Both favour kcptun in wire bytes.
struct KCPTunProfile: Sendable, Equatable {
    /// kcptun's `--mode`: fast3 (nodelay 1, interval 10 ms, resend 2, no congestion window) or
    /// fast2 (the same with a 20 ms interval).
    var mode: String
    var forwardErrorCorrection: Bool

    /// kcptun's shipped FEC shards (`--datashard`, `--parityshard`).
    static let shippedDataShards = 10
    static let shippedParityShards = 3

    /// Where Debian's kcptun package puts its programs, found on PATH.
    static var clientPath: String? { lossBenchFindExecutable("kcptun-client") }
    static var serverPath: String? { lossBenchFindExecutable("kcptun-server") }
    static var isInstalled: Bool { clientPath != nil && serverPath != nil }

    /// The flags both ends of a tunnel must agree on.
    var sharedFlags: [String] {
        ["--mode", mode, "--crypt", "none", "--nocomp",
         "--datashard", "\(forwardErrorCorrection ? KCPTunProfile.shippedDataShards : 0)",
         "--parityshard", "\(forwardErrorCorrection ? KCPTunProfile.shippedParityShards : 0)",
         "--quiet"]
    }
}

/// The kcptun processes of one loss run, on the packet-level link: a `kcptun-server` in the
/// server namespace per relay port it fronts (inkwired's native TCP, its legacy listener), and a
/// `kcptun-client` in the client namespace per member, as each device of a class would run its
/// own tunnel to the relay. A member's TCP stream goes to its client on the client namespace's
/// address, which carries it as one smux stream over one KCP session (UDP) across the impaired
/// link to the server, which opens a TCP stream to the relay port on the server namespace's
/// address. Only the namespace addresses are used; nothing else listens or is reached.
///
/// CPU: `/proc/PID/stat` utime + stime of each kcptun process (all its threads), read like the
/// relay's. The servers are the relay side (the run's relay CPU adds them to inkwired's); the
/// clients are the members' side, reported apart.
final class LossKCPTunnels {
    /// The servers' UDP ports in the server namespace (in front of inkwired's native TCP and of
    /// its legacy listener), and the first of the clients' consecutive TCP ports in the client
    /// namespace. The namespaces are the run's own and empty, so fixed ports are free (below
    /// the kernel's ephemeral range, which starts at 32768); the link tallies the legacy
    /// tunnel's bytes by its port.
    static let nativeServerPort: UInt16 = 29900
    static let legacyServerPort: UInt16 = 29901
    static let clientPortBase: UInt16 = 12900
    /// Most tunnel processes of one run (one client per member, one server per relay port).
    static let maximumProcesses = LossBenchOptions.maximumRooms * LossBenchOptions.maximumMembers + 8
    /// How long kcptun may take to start listening (it derives its key first, even with no crypt).
    static let readyTimeoutMicroseconds: UInt64 = 20_000_000
    static let stopTimeoutMicroseconds: UInt64 = 5_000_000
    /// How long a tunnel may take to log its counters after SIGUSR1.
    static let countersTimeoutMicroseconds: UInt64 = 3_000_000
    /// What kcptun logs on SIGUSR1, before its kcp-go counters (`KCP SNMP:&{Name:value ...}`).
    static let countersMarker = "KCP SNMP:&{"

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private struct Tunnel {
        var pid: pid_t
        var log: String
        var isServer: Bool
        /// The port it listens on in its namespace (UDP for a server, TCP for a client).
        var port: UInt16
        var reaped = false
    }

    let profile: KCPTunProfile
    let directory: String
    private let serverLauncher: [String]
    private let clientLauncher: [String]
    private var tunnels: [Tunnel] = []
    private var nextClientPort = LossKCPTunnels.clientPortBase

    init(profile: KCPTunProfile, serverLauncher: [String], clientLauncher: [String]) throws(Failure) {
        guard KCPTunProfile.isInstalled else {
            throw Failure(description: "kcptun-client and kcptun-server are not on PATH (Debian: apt-get install kcptun)")
        }
        self.profile = profile
        self.serverLauncher = serverLauncher
        self.clientLauncher = clientLauncher
        var template = Array("/tmp/inkwire-bench-loss-kcptun-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw Failure(description: "mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Starts a server in the server namespace in front of `target` (a relay port there),
    /// listening on UDP `port` at `PacketLink.serverAddress`.
    func addServer(target: SocketAddress, port: UInt16) throws(Failure) {
        try start(server: true, port: port, serverLauncher + [KCPTunProfile.serverPath ?? "kcptun-server",
                  "--listen", "\(PacketLink.serverAddress):\(port)", "--target", "\(target)"] + profile.sharedFlags)
    }

    /// Starts a client in the client namespace for one member, tunnelling to the server on
    /// `serverPort`; returns the TCP address the member connects to.
    func addClient(serverPort: UInt16) throws(Failure) -> SocketAddress {
        let port = nextClientPort
        nextClientPort += 1
        try start(server: false, port: port, clientLauncher + [KCPTunProfile.clientPath ?? "kcptun-client",
                  "--localaddr", "\(PacketLink.clientAddress):\(port)", "--remoteaddr", "\(PacketLink.serverAddress):\(serverPort)"]
                  + profile.sharedFlags)
        guard let address = try? SocketAddress.parse("\(PacketLink.clientAddress):\(port)") else {
            throw Failure(description: "bad client address \(PacketLink.clientAddress):\(port)")
        }
        return address
    }

    /// A loss run's tunnels: servers in front of the relay's `native` TCP port and its `legacy`
    /// listener, a client for each of `members` members and one for the legacy app; waits until
    /// all listen. Returns the addresses the members and the legacy app connect to.
    func startForRelay(native: SocketAddress, legacy: SocketAddress, members: Int) throws(Failure)
        -> (members: [SocketAddress], legacy: SocketAddress) {
        try addServer(target: native, port: LossKCPTunnels.nativeServerPort)
        try addServer(target: legacy, port: LossKCPTunnels.legacyServerPort)
        var targets: [SocketAddress] = []
        for _ in 0..<members { targets.append(try addClient(serverPort: LossKCPTunnels.nativeServerPort)) }
        let legacyClient = try addClient(serverPort: LossKCPTunnels.legacyServerPort)
        try waitReady()
        return (targets, legacyClient)
    }

    private func start(server: Bool, port: UInt16, _ argv: [String]) throws(Failure) {
        guard tunnels.count < LossKCPTunnels.maximumProcesses else {
            throw Failure(description: "more than \(LossKCPTunnels.maximumProcesses) kcptun processes")
        }
        let log = directory + "/\(server ? "server" : "client")-\(tunnels.count).log"
        do {
            tunnels.append(Tunnel(pid: try lossBenchSpawn(argv, output: log), log: log, isServer: server, port: port))
        } catch {
            throw Failure(description: "\(argv.joined(separator: " ")): \(error)")
        }
    }

    /// Waits until every tunnel started so far listens (its UDP or TCP port shows in its own
    /// namespace's /proc/PID/net table; kcptun logs its settings before it binds), or one
    /// exits, or the timeout.
    func waitReady() throws(Failure) {
        let deadline = lossBenchNow() + LossKCPTunnels.readyTimeoutMicroseconds
        for index in tunnels.indices {
            while !lossBenchListens(pid: tunnels[index].pid, tcp: !tunnels[index].isServer, port: tunnels[index].port) {
                var status: Int32 = 0
                let exited = waitpid(tunnels[index].pid, &status, WNOHANG) != 0
                if exited { tunnels[index].reaped = true }
                if exited || lossBenchNow() > deadline || lossBenchStopRequested != 0 {
                    let tail = String(decoding: lossBenchReadFile(tunnels[index].log).suffix(600), as: UTF8.self)
                    throw Failure(description: "kcptun \(tunnels[index].isServer ? "server" : "client") \(index) "
                                  + (exited ? "exited" : "not listening on \(tunnels[index].port)") + ": \(tail)")
                }
                usleep(5_000)
            }
        }
    }

    /// kcp-go's counters added up over every tunnel (SIGUSR1 makes kcptun log them), cumulative
    /// since each started; empty when a tunnel did not answer in time.
    func counters() -> [String: Int] {
        var seen: [Int] = []
        for tunnel in tunnels where !tunnel.reaped {
            seen.append(lossBenchCount(LossKCPTunnels.countersMarker, in: lossBenchReadFile(tunnel.log)))
            kill(tunnel.pid, SIGUSR1)
        }
        var total: [String: Int] = [:]
        let deadline = lossBenchNow() + LossKCPTunnels.countersTimeoutMicroseconds
        for (index, tunnel) in tunnels.filter({ !$0.reaped }).enumerated() {
            var text = ""
            while true {
                let log = lossBenchReadFile(tunnel.log)
                if lossBenchCount(LossKCPTunnels.countersMarker, in: log) > seen[index] {
                    text = String(decoding: log, as: UTF8.self)
                    break
                }
                if lossBenchNow() > deadline { return [:] }
                usleep(2_000)
            }
            guard let marker = text.range(of: LossKCPTunnels.countersMarker, options: .backwards) else { return [:] }
            let body = text[marker.upperBound...].prefix { $0 != "}" }
            for pair in body.split(separator: " ") {
                let parts = pair.split(separator: ":", maxSplits: 1)
                if parts.count == 2, let value = Int(parts[1]) { total[String(parts[0]), default: 0] += value }
            }
        }
        return total
    }

    var serverCount: Int { tunnels.filter(\.isServer).count }
    var clientCount: Int { tunnels.count - serverCount }
    /// CPU seconds (user + system) of the servers so far, and of the clients.
    var serverCPUSeconds: Double { tunnels.filter { $0.isServer && !$0.reaped }.reduce(0) { $0 + lossBenchProcessCPUSeconds($1.pid) } }
    var clientCPUSeconds: Double { tunnels.filter { !$0.isServer && !$0.reaped }.reduce(0) { $0 + lossBenchProcessCPUSeconds($1.pid) } }
    /// The servers' peak resident sets added up, MB.
    var serverPeakRSSMegabytes: Double { tunnels.filter { $0.isServer && !$0.reaped }.reduce(0) { $0 + lossBenchPeakRSSMegabytes($1.pid) } }

    /// SIGTERM to every tunnel, then reap them all (SIGKILL after the timeout); removes the
    /// logs. Idempotent.
    func stop() {
        for tunnel in tunnels where !tunnel.reaped { kill(tunnel.pid, SIGTERM) }
        let deadline = lossBenchNow() + LossKCPTunnels.stopTimeoutMicroseconds
        for index in tunnels.indices where !tunnels[index].reaped {
            var status: Int32 = 0
            while waitpid(tunnels[index].pid, &status, WNOHANG) == 0 {
                if lossBenchNow() > deadline {
                    kill(tunnels[index].pid, SIGKILL)
                    waitpid(tunnels[index].pid, &status, 0)
                    break
                }
                usleep(2_000)
            }
            tunnels[index].reaped = true
        }
        lossBenchRemoveTree(directory)
    }

    deinit { stop() }
}

/// Whether process `pid`'s network namespace has a socket bound to `port` (TCP: listening).
func lossBenchListens(pid: pid_t, tcp: Bool, port: UInt16) -> Bool {
    let table = String(decoding: lossBenchReadFile("/proc/\(pid)/net/\(tcp ? "tcp" : "udp")"), as: UTF8.self)
    var hex = String(port, radix: 16, uppercase: true)
    while hex.count < 4 { hex = "0" + hex }
    for line in table.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count > 3, fields[1].hasSuffix(":" + hex) else { continue }
        if !tcp || fields[3] == "0A" { return true }
    }
    return false
}

/// How often `marker` occurs in `bytes`.
func lossBenchCount(_ marker: String, in bytes: [UInt8]) -> Int {
    String(decoding: bytes, as: UTF8.self).components(separatedBy: marker).count - 1
}

/// The first `name` on PATH that can be executed, as a path.
func lossBenchFindExecutable(_ name: String) -> String? {
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":") where !directory.isEmpty {
        let candidate = "\(directory)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}
