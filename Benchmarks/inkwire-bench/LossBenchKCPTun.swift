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
    /// What kcptun logs once it has derived its key and goes on to serve.
    static let readyMarker = "key derivation done"
    static let stopTimeoutMicroseconds: UInt64 = 5_000_000

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private struct Tunnel {
        var pid: pid_t
        var log: String
        var isServer: Bool
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
        try start(server: true, serverLauncher + [KCPTunProfile.serverPath ?? "kcptun-server",
                  "--listen", "\(PacketLink.serverAddress):\(port)", "--target", "\(target)"] + profile.sharedFlags)
    }

    /// Starts a client in the client namespace for one member, tunnelling to the server on
    /// `serverPort`; returns the TCP address the member connects to.
    func addClient(serverPort: UInt16) throws(Failure) -> SocketAddress {
        let port = nextClientPort
        nextClientPort += 1
        try start(server: false, clientLauncher + [KCPTunProfile.clientPath ?? "kcptun-client",
                  "--localaddr", "\(PacketLink.clientAddress):\(port)", "--remoteaddr", "\(PacketLink.serverAddress):\(serverPort)"]
                  + profile.sharedFlags)
        guard let address = try? SocketAddress.parse("\(PacketLink.clientAddress):\(port)") else {
            throw Failure(description: "bad client address \(PacketLink.clientAddress):\(port)")
        }
        return address
    }

    private func start(server: Bool, _ argv: [String]) throws(Failure) {
        guard tunnels.count < LossKCPTunnels.maximumProcesses else {
            throw Failure(description: "more than \(LossKCPTunnels.maximumProcesses) kcptun processes")
        }
        let log = directory + "/\(server ? "server" : "client")-\(tunnels.count).log"
        do {
            tunnels.append(Tunnel(pid: try lossBenchSpawn(argv, output: log), log: log, isServer: server))
        } catch {
            throw Failure(description: "\(argv.joined(separator: " ")): \(error)")
        }
    }

    /// Waits until every tunnel started so far says it serves (or one exits, or the timeout).
    func waitReady() throws(Failure) {
        let deadline = lossBenchNow() + LossKCPTunnels.readyTimeoutMicroseconds
        for index in tunnels.indices {
            while !String(decoding: lossBenchReadFile(tunnels[index].log), as: UTF8.self).contains(LossKCPTunnels.readyMarker) {
                var status: Int32 = 0
                let exited = waitpid(tunnels[index].pid, &status, WNOHANG) != 0
                if exited { tunnels[index].reaped = true }
                if exited || lossBenchNow() > deadline || lossBenchStopRequested != 0 {
                    let tail = String(decoding: lossBenchReadFile(tunnels[index].log).suffix(600), as: UTF8.self)
                    throw Failure(description: "kcptun \(tunnels[index].isServer ? "server" : "client") \(index) "
                                  + (exited ? "exited" : "not ready") + ": \(tail)")
                }
                usleep(5_000)
            }
        }
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

/// The first `name` on PATH that can be executed, as a path.
func lossBenchFindExecutable(_ name: String) -> String? {
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":") where !directory.isEmpty {
        let candidate = "\(directory)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}
