import Glibc
import InkSim
import Synchronization

/// A packet-level impaired link between two network namespaces (needs root, `/dev/net/tun` and
/// iproute2's `ip`; no netem). Each namespace holds one TUN device, `inkw0`, addressed
/// point-to-point: the server side `10.77.0.1`, the client side `10.77.0.2`. This process's
/// forwarder thread reads every IPv4 packet one side sends, applies the same `LinkImpairment`
/// as `inkwire-bench link` (one decision stream per direction, derived from `seed` as
/// `LinkProxy` derives them) and writes it to the other side at its due time. So TCP, UDP and
/// ENet all cross exactly the same kind of link, and the k-th packet of a direction gets the
/// same fate for the same seed (TCP's own packet sequence still depends on timing).
///
/// Use:
///
///     let link = try PacketLink.start(configuration: config, seed: 7)
///     defer { link.stop() }
///     let daemon = try link.spawn(in: .server, ["/path/inkwired", "--udp", "\(PacketLink.serverAddress):7420"])
///     let member = try link.spawn(in: .client, ["/path/member", "udp://\(PacketLink.serverAddress):7420"])
///     ... waitpid(member, ...) ...
///     let (up, down) = link.counters   // client->server, server->client: wire bytes, drops
///
/// Each namespace is empty and private: fixed ports are always free there, and traffic never
/// leaves the two namespaces. `run(in:_:)` opens sockets in a namespace from this process.
///
/// Cleanup: `stop()` (idempotent, also run by `deinit`) stops the forwarder, ends children from
/// `spawn` that still run, deletes the devices and the namespaces. Namespaces left at `exit`
/// are removed then; a crash or a fatal signal leaves them to the next `start`, which removes
/// namespaces with its prefix whose creating process is dead. A program that wants Ctrl-C to
/// clean up must catch SIGINT/SIGTERM itself and call `stop()` (the `netns-link` command does).
final class PacketLink: @unchecked Sendable {
    enum Side: String, Sendable {
        /// Namespace A, where the server runs.
        case server = "a"
        /// Namespace B, where the clients run.
        case client = "b"
    }

    static let defaultPrefix = "inkw"
    /// The server side's address inside namespace A.
    static let serverAddress = "10.77.0.1"
    /// The client side's address inside namespace B.
    static let clientAddress = "10.77.0.2"
    /// How long `stop()` lets a still-running child exit after SIGTERM before SIGKILL.
    static let childGraceMicroseconds: UInt64 = 2_000_000
    /// Links started by this process so far (makes names unique within the process).
    private static let started = Atomic<Int>(0)

    let configuration: LinkConfiguration
    let seed: UInt64
    /// What `start` set, or nil for the kernel's default.
    let tcpCongestionControl: String?
    let serverNamespace: NetworkNamespace
    let clientNamespace: NetworkNamespace
    private let serverDevice: TunDevice
    private let clientDevice: TunDevice
    private let forwarder: PacketForwarder
    private let children = Mutex<[pid_t]>([])
    private let stopped = Atomic<Bool>(false)

    /// Sets the link up and starts forwarding. Names are `PREFIX-PID-N-a` (server) and `-b`
    /// (client). The configuration's `maximumDatagramSize` is raised to the devices' MTU so it
    /// means "IP packet size" here. `tcpCongestionControl` (e.g. "cubic") sets both namespaces'
    /// TCP congestion control; nil keeps the kernel's default (new namespaces take the host's,
    /// BBR on the benchmark machine). Throws (and leaves nothing behind) when anything fails.
    /// `talliedServerPorts`: the counters' `talliedBytes` count the packets of flows with these
    /// server-side ports.
    static func start(configuration: LinkConfiguration, seed: UInt64, prefix: String = defaultPrefix,
                      tcpCongestionControl: String? = nil, talliedServerPorts: Set<UInt16> = []) throws -> PacketLink {
        try NetworkNamespace.validate(prefix: prefix)
        NetworkNamespace.removeStale(prefix: prefix)
        let serial = started.wrappingAdd(1, ordering: .relaxed).newValue
        var configuration = configuration
        configuration.maximumDatagramSize = max(configuration.maximumDatagramSize, TunDevice.mtu)
        var namespaces: [NetworkNamespace] = []
        var devices: [TunDevice] = []
        do {
            for side in [Side.server, .client] {
                namespaces.append(try NetworkNamespace.create(NetworkNamespace.name(prefix: prefix, serial: serial, side: side.rawValue)))
            }
            devices.append(try TunDevice.create(in: namespaces[0], local: serverAddress, peer: clientAddress))
            devices.append(try TunDevice.create(in: namespaces[1], local: clientAddress, peer: serverAddress))
            if let algorithm = tcpCongestionControl {
                for namespace in namespaces {
                    let error = try namespace.run { TunDevice.writeSysctl("/proc/sys/net/ipv4/tcp_congestion_control", algorithm) }
                    guard error == 0 else {
                        throw NetworkNamespace.Failure(description: "TCP congestion control '\(algorithm)' refused: \(String(cString: strerror(error)))"
                            + " (a namespace may only pick those in the host's net.ipv4.tcp_allowed_congestion_control)")
                    }
                }
            }
            let forwarder = try PacketForwarder(serverFD: devices[0].fd, clientFD: devices[1].fd, configuration: configuration, seed: seed,
                                                talliedServerPorts: talliedServerPorts)
            try forwarder.start()
            return PacketLink(configuration: configuration, seed: seed, tcpCongestionControl: tcpCongestionControl,
                              namespaces: namespaces, devices: devices, forwarder: forwarder)
        } catch {
            devices.forEach { $0.close() }
            namespaces.forEach { $0.remove() }
            throw error
        }
    }

    private init(configuration: LinkConfiguration, seed: UInt64, tcpCongestionControl: String?,
                 namespaces: [NetworkNamespace], devices: [TunDevice], forwarder: PacketForwarder) {
        self.configuration = configuration
        self.seed = seed
        self.tcpCongestionControl = tcpCongestionControl
        serverNamespace = namespaces[0]
        clientNamespace = namespaces[1]
        serverDevice = devices[0]
        clientDevice = devices[1]
        self.forwarder = forwarder
    }

    deinit { stop() }

    func namespace(_ side: Side) -> NetworkNamespace { side == .server ? serverNamespace : clientNamespace }

    static func address(_ side: Side) -> String { side == .server ? serverAddress : clientAddress }

    /// `argv` prefixed so it runs inside `side`'s namespace (`ip netns exec NS ...`, which then
    /// execs the program: the pid a spawner gets is the program's own). For callers with their
    /// own spawner; `spawn` also ends the child at `stop()`.
    func commandLine(in side: Side, _ argv: [String]) -> [String] {
        [IPCommand.path ?? "ip", "netns", "exec", namespace(side).name] + argv
    }

    /// Starts `argv` (`argv[0]` a path) inside `side`'s namespace with an empty signal mask and
    /// default handlers; its stdout/stderr go to the given descriptors (inherited when nil),
    /// stdin is /dev/null. `environment` nil inherits this process's. The caller reaps it;
    /// `stop()` sends SIGTERM (then SIGKILL) to it if it still runs then.
    func spawn(in side: Side, _ argv: [String], environment: [String: String]? = nil,
               stdout: Int32? = nil, stderr: Int32? = nil) throws -> pid_t {
        let pid = try ChildProcess.spawn(commandLine(in: side, argv), environment: environment, stdout: stdout, stderr: stderr)
        children.withLock { $0.append(pid) }
        return pid
    }

    /// Runs `body` on a thread inside `side`'s namespace and returns its result: sockets it opens
    /// belong to that namespace, and may then be used from any thread.
    func run<T: Sendable>(in side: Side, _ body: @escaping @Sendable () throws -> T) throws -> T {
        try namespace(side).run(body)
    }

    /// Counters per direction (client to server, server to client), as of the forwarder's
    /// latest wake-up.
    var counters: (toServer: PacketLinkCounters, toClient: PacketLinkCounters) { forwarder.snapshot }

    /// Packets the kernels dropped before the forwarder saw them (the device queue overflowed
    /// because the forwarder fell behind; outside the seeded model, so non-zero means the run
    /// lost more than configured): client to server, server to client. Read before `stop()`.
    var deviceDrops: (toServer: Int, toClient: Int) {
        (clientDevice.transmitDropped() ?? 0, serverDevice.transmitDropped() ?? 0)
    }

    /// Packets waiting for their due time right now.
    var held: Int { forwarder.held }

    /// Stops forwarding, ends still-running children from `spawn`, deletes the devices and the
    /// namespaces. Idempotent; counters stay readable.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        forwarder.stop()
        ChildProcess.end(children.withLock { $0 }, graceMicroseconds: PacketLink.childGraceMicroseconds)
        serverDevice.close()
        clientDevice.close()
        serverNamespace.remove()
        clientNamespace.remove()
    }
}
