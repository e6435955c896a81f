import InkSim

/// The command line of `inkwire-bench netns-link`. The impairment flags are handed to
/// `LinkProxyOptions`, so both links accept exactly the same values and meanings.
struct PacketLinkOptions {
    enum Mode: Equatable {
        /// Set up, print the namespaces, wait for Ctrl-C (or `--duration`).
        case wait
        /// Measure the link from inside the namespaces (round trip, UDP loss, TCP throughput).
        case probe
        /// Run a command in one namespace; stop when it exits.
        case command([String], PacketLink.Side)
    }

    /// Longest `--probe-seconds` accepted.
    static let maximumProbeSeconds: Double = 600

    static let usage = """
        usage: inkwire-bench netns-link [IMPAIRMENT] [--name PREFIX] [--tcp-cc ALG] [--wait | --probe [--probe-seconds S]]
               inkwire-bench netns-link [IMPAIRMENT] [--name PREFIX] [--tcp-cc ALG] [--in server|client] -- COMMAND [ARG...]
          IMPAIRMENT: [--loss-percent P] [--loss-model bernoulli|gilbert-elliott:P_GB,P_BG[,LOSS_GOOD,LOSS_BAD]]
            [--delay-ms D] [--jitter-ms J] [--reorder-percent R] [--reorder-delay-ms H] [--duplicate-percent U]
            [--rate-kbps K] [--seed S] [--duration SECONDS]   (per direction, as for `inkwire-bench link`)
          Needs root, /dev/net/tun and iproute2. Namespaces PREFIX-PID-N-a (server, \(PacketLink.serverAddress)) and
          PREFIX-PID-N-b (client, \(PacketLink.clientAddress)); PREFIX defaults to \(PacketLink.defaultPrefix). COMMAND runs
          in the client namespace unless --in server; its exit status becomes ours. Ctrl-C removes everything.
          --tcp-cc sets both namespaces' TCP congestion control (default: the kernel's, e.g. bbr or cubic).
        """

    var link: LinkConfiguration
    var seed: UInt64
    var durationSeconds: Double?
    var prefix = PacketLink.defaultPrefix
    var mode = Mode.wait
    var probeSeconds: Double = 3
    /// TCP congestion control of both namespaces; nil keeps the kernel's default.
    var tcpCongestionControl: String?

    init(_ arguments: [String]) throws(LinkProxyOptions.Invalid) {
        let split = arguments.firstIndex(of: "--")
        let flags = Array(arguments[..<(split ?? arguments.endIndex)])
        let command = split.map { Array(arguments[($0 + 1)...]) } ?? []
        var impairment = ["--listen", "127.0.0.1:0", "--forward", "127.0.0.1:0"]
        var side = PacketLink.Side.client
        var sawSide = false, sawWait = false, sawProbe = false
        var index = 0
        while index < flags.count {
            let name = flags[index]
            switch name {
            case "--wait": sawWait = true; index += 1; continue
            case "--probe": sawProbe = true; index += 1; continue
            default: break
            }
            guard index + 1 < flags.count else { throw .init(description: "\(name) needs a value") }
            let value = flags[index + 1]
            switch name {
            case "--name":
                do { try NetworkNamespace.validate(prefix: value) } catch { throw .init(description: "--name: \(error)") }
                prefix = value
            case "--in":
                switch value {
                case "server", "a": side = .server
                case "client", "b": side = .client
                default: throw .init(description: "--in must be server or client, got '\(value)'")
                }
                sawSide = true
            case "--tcp-cc":
                guard !value.isEmpty, value.utf8.count < 16, value.utf8.allSatisfy({ (97...122).contains($0) || (48...57).contains($0) || $0 == 95 }) else {
                    throw .init(description: "--tcp-cc takes a congestion control name such as cubic, got '\(value)'")
                }
                tcpCongestionControl = value
            case "--probe-seconds":
                guard let seconds = Double(value), seconds > 0, seconds <= PacketLinkOptions.maximumProbeSeconds else {
                    throw .init(description: "--probe-seconds must be from 0 to \(Int(PacketLinkOptions.maximumProbeSeconds)), got '\(value)'")
                }
                probeSeconds = seconds
            case "--listen", "--forward":
                throw .init(description: "unknown option '\(name)'")
            default:
                impairment += [name, value]
            }
            index += 2
        }
        let parsed = try LinkProxyOptions(impairment)
        link = parsed.link
        seed = parsed.seed
        durationSeconds = parsed.durationSeconds
        if split != nil {
            guard !command.isEmpty else { throw .init(description: "nothing to run after '--'") }
            guard !sawWait && !sawProbe else { throw .init(description: "--wait and --probe take no command") }
            mode = .command(command, side)
        } else {
            guard !(sawWait && sawProbe) else { throw .init(description: "choose one of --wait and --probe") }
            guard !sawSide else { throw .init(description: "--in applies to a command after '--'") }
            mode = sawProbe ? .probe : .wait
        }
    }
}
