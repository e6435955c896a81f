import Glibc
import InkProtocol
import InkSim

/// The packet-level link (`PacketLink`, two network namespaces joined by TUN devices) for one
/// loss run: the relay runs in the server namespace, the members' sockets are opened in the
/// client namespace, and every IP packet between them (UDP, TCP, ENet alike) crosses the same
/// seeded impairment: the loss per direction and RTT / 2 delay each way.
final class LossNetnsLink: LossBenchLink {
    let link: PacketLink
    var name: String { "netns" }

    /// True when this process can build the link: root, `/dev/net/tun`, iproute2's `ip`, setns.
    static var isAvailable: Bool {
        getuid() == 0 && access("/dev/net/tun", R_OK | W_OK) == 0 && IPCommand.path != nil && SystemCalls.setns != nil
    }

    /// `talliedServerPorts`: flows (by server-side port) whose bytes `talliedBytes` counts apart.
    init(lossPercent: Double, rttMilliseconds: Int, seed: UInt64, tcpCongestionControl: String?, talliedServerPorts: Set<UInt16> = []) throws {
        var configuration = LinkConfiguration.clean(delay: .init(microseconds: UInt64(rttMilliseconds) * 500))
        configuration.loss = lossPercent > 0 ? .bernoulli(lossPercent / 100) : .none
        link = try PacketLink.start(configuration: configuration, seed: seed, prefix: "inkwloss", tcpCongestionControl: tcpCongestionControl,
                                   talliedServerPorts: talliedServerPorts)
    }

    /// The address the relay binds and members reach.
    var serverHost: String { PacketLink.serverAddress }

    /// Prefix of a command line that runs in the server namespace, or in the client namespace.
    var serverLauncher: [String] { link.commandLine(in: .server, []) }
    var clientLauncher: [String] { link.commandLine(in: .client, []) }

    /// IP bytes that entered the link in either direction (before any loss).
    var wireBytes: Int {
        let (up, down) = link.counters
        return up.bytes + down.bytes
    }

    /// The tallied flows' bytes in either direction (inside `wireBytes`).
    var talliedBytes: Int {
        let (up, down) = link.counters
        return up.talliedBytes + down.talliedBytes
    }

    var deviceDrops: Int {
        let (up, down) = link.deviceDrops
        return up + down
    }

    /// Runs `body` with this thread in the client namespace (sockets opened meanwhile stay there),
    /// then returns the thread to the namespace it was in.
    func inClientNamespace<T>(_ body: () throws -> T) throws -> T {
        guard let setns = SystemCalls.setns else { throw PacketLinkUnavailable(description: "setns is not available") }
        let original = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        guard original >= 0 else { throw PacketLinkUnavailable(description: "cannot open this thread's network namespace") }
        defer { close(original) }
        let target = open(link.clientNamespace.path, O_RDONLY | O_CLOEXEC)
        guard target >= 0 else { throw PacketLinkUnavailable(description: "cannot open \(link.clientNamespace.path)") }
        defer { close(target) }
        guard setns(target, SystemCalls.cloneNewNet) == 0 else {
            throw PacketLinkUnavailable(description: "setns \(link.clientNamespace.path): \(String(cString: strerror(errno)))")
        }
        defer {
            if setns(original, SystemCalls.cloneNewNet) != 0 {
                lossBenchLog("inkwire-bench loss: cannot return to the original network namespace; stopping")
                exit(1)
            }
        }
        return try body()
    }

    func stop() { link.stop() }

    struct PacketLinkUnavailable: Error, CustomStringConvertible {
        let description: String
    }
}

/// The host's TCP congestion control (what new namespaces start with).
func lossBenchHostTCPCongestionControl() -> String {
    String(decoding: lossBenchReadFile("/proc/sys/net/ipv4/tcp_congestion_control"), as: UTF8.self).filter { !$0.isWhitespace }
}
