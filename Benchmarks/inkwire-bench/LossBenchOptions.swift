import InkUV
/// The transports `inkwire-bench loss` compares.
enum LossTransport: String, CaseIterable, Sendable {
    /// inkwired's native UDP: ARQ sessions (`ClientSession` over `.datagram`).
    case inkwireUDP = "inkwire-udp"
    /// inkwired's native TCP: the same session messages in length-prefixed frames.
    case inkwireTCP = "inkwire-tcp"
    /// The ENet baseline relay (`inkwire-bench enet-relay`), reliable ordered channels.
    case enet
    /// inkwired's native TCP (and one legacy app's stream) through Debian's kcptun: a
    /// `kcptun-client` per member, one `kcptun-server` per relay port, KCP over UDP across the
    /// link (`LossKCPTunnels`). Profile fast3 or fast2, FEC as shipped (10 data + 3 parity
    /// shards) or off.
    case kcptunFast3 = "kcptun-fast3"
    case kcptunFast2 = "kcptun-fast2"
    case kcptunFast3NoFEC = "kcptun-fast3-nofec"
    case kcptunFast2NoFEC = "kcptun-fast2-nofec"

    /// The members' own sessions are ARQ over UDP (the others are TCP streams or ENet).
    var isDatagram: Bool { self == .inkwireUDP || self == .enet }

    /// The in-process UDP proxy can impair these; the others need packet-level loss (TCP, or
    /// a tunnel whose UDP flows the proxy cannot stand between).
    var isProxyImpairable: Bool { isDatagram }

    /// The kcptun profile, for the tunnelled transports.
    var kcptun: KCPTunProfile? {
        switch self {
        case .kcptunFast3: KCPTunProfile(mode: "fast3", forwardErrorCorrection: true)
        case .kcptunFast2: KCPTunProfile(mode: "fast2", forwardErrorCorrection: true)
        case .kcptunFast3NoFEC: KCPTunProfile(mode: "fast3", forwardErrorCorrection: false)
        case .kcptunFast2NoFEC: KCPTunProfile(mode: "fast2", forwardErrorCorrection: false)
        case .inkwireUDP, .inkwireTCP, .enet: nil
        }
    }

    /// What `--transports` lists when not given: the three baselines, and kcptun's two
    /// profiles with FEC as shipped when kcptun is installed.
    static var defaults: [LossTransport] {
        [.inkwireUDP, .inkwireTCP, .enet] + (KCPTunProfile.isInstalled ? [.kcptunFast3, .kcptunFast2] : [])
    }
}

/// How member traffic is impaired.
enum LossLinkMode: String, Sendable {
    /// The in-process UDP impairment proxy (`LinkProxy`): no root needed, datagram transports only.
    case proxy
    /// Two network namespaces joined by a TUN link impairing every IP packet (root needed).
    case netns
}

/// The command line of `inkwire-bench loss`, parsed and checked; every value has a bound.
struct LossBenchOptions: Sendable {
    /// Most rooms in one run.
    static let maximumRooms = 1000
    /// Most members per room (one draws, the others watch).
    static let maximumMembers = 256
    /// Longest trace slice a room plays, in seconds.
    static let maximumDurationSeconds = 3600.0
    /// Highest RTT accepted, in milliseconds.
    static let maximumRTTMilliseconds = 10_000
    /// Most loss levels in one run.
    static let maximumLossLevels = 32

    static let usage = """
        usage: inkwire-bench loss [--loss-percent 0,2,5,10,20] [--rtt-ms 40] [--rooms 2] [--members 4]
          [--trace ../shared/traces/lesson-a.csv] [--duration 4] [--transports inkwire-udp,inkwire-tcp,enet,kcptun-fast3,kcptun-fast2]
          [--seed 1] [--out DIR] [--link proxy|netns] [--tcp-cc ALG] [--drain-timeout 30]
          [--tcp-rto-max-ms 2000]
          Starts a real inkwired and the ENet baseline relay; per room one member draws the trace
          (its first --duration seconds from a per-room offset, at the recorded pace, in 60 ms
          batches) and the others watch, all through a link with --rtt-ms / 2 delay each way and
          the given loss per direction. Prints one JSON line per transport and loss level, a
          markdown table, and writes the lines, the table and one latency CDF (SVG) per loss level
          to --out (default ./bench-out). --link netns (the default as root) runs the relay and the
          members in two network namespaces joined by an impaired TUN link, so TCP sees the same
          packet loss; --link proxy (no root) impairs UDP only and skips inkwire-tcp.
          --tcp-rto-max-ms caps inkwire-tcp's retransmission timeout at both ends (inkwired's
          --tcp-rto-max-ms and the members' sockets; 0 keeps the kernel's 120 s).
          Transports: inkwire-udp, inkwire-tcp, enet, and inkwired's TCP through kcptun
          (kcptun-fast3, kcptun-fast2, kcptun-fast3-nofec, kcptun-fast2-nofec; netns link only;
          the default list has the first two when kcptun-client and kcptun-server are installed).
        """

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    var lossPercents: [Double] = [0, 2, 5, 10, 20]
    var rttMilliseconds = 40
    var rooms = 2
    var members = 4
    var tracePath = "../shared/traces/lesson-a.csv"
    var durationSeconds = 4.0
    var transports: [LossTransport] = LossTransport.defaults
    var seed: UInt64 = 1
    var outputDirectory = "./bench-out"
    /// nil: netns when running as root and the packet link is available, else proxy.
    var link: LossLinkMode?
    /// After the last batch is sent, how long watchers may take to catch up before the run
    /// counts what is missing as lost. 30 s outlasts six back-to-back TCP retransmission
    /// timeouts (0.2 s doubling to 6.4 s, 12.6 s in all), which 20 % loss does produce.
    var drainTimeoutSeconds = 30.0
    /// TCP congestion control inside the packet-level link's namespaces; nil keeps what new
    /// namespaces take from the host (bbr on the benchmark machine, where a namespace may only
    /// pick reno or the host's default).
    var tcpCongestionControl: String?
    /// inkwire-tcp's retransmission-timeout ceiling at both ends, ms (0: the kernel's own); the
    /// default is inkwired's.
    var tcpRetransmitCeilingMs: UInt32 = InkwireLossMember.defaultTCPRetransmitCeilingMs

    init() {}

    init(_ arguments: [String]) throws(Invalid) {
        var index = 0
        func value(_ name: String) throws(Invalid) -> String {
            guard index + 1 < arguments.count else { throw Invalid(description: "\(name) needs a value") }
            index += 1
            return arguments[index]
        }
        func integer(_ name: String, _ range: ClosedRange<Int>) throws(Invalid) -> Int {
            let text = try value(name)
            guard let n = Int(text), range.contains(n) else {
                throw Invalid(description: "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
            }
            return n
        }
        func seconds(_ name: String) throws(Invalid) -> Double {
            let text = try value(name)
            guard let s = Double(text), s > 0, s <= LossBenchOptions.maximumDurationSeconds else {
                throw Invalid(description: "\(name) must be a positive number of seconds up to \(Int(LossBenchOptions.maximumDurationSeconds)), got '\(text)'")
            }
            return s
        }
        while index < arguments.count {
            let name = arguments[index]
            switch name {
            case "--loss-percent":
                let text = try value(name)
                var levels: [Double] = []
                for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                    guard let p = Double(part), p >= 0, p <= 100 else {
                        throw Invalid(description: "--loss-percent takes percentages from 0 to 100, comma-separated, got '\(text)'")
                    }
                    levels.append(p)
                }
                guard !levels.isEmpty, levels.count <= LossBenchOptions.maximumLossLevels else {
                    throw Invalid(description: "--loss-percent takes 1 to \(LossBenchOptions.maximumLossLevels) levels")
                }
                lossPercents = levels
            case "--rtt-ms": rttMilliseconds = try integer(name, 0...LossBenchOptions.maximumRTTMilliseconds)
            case "--rooms": rooms = try integer(name, 1...LossBenchOptions.maximumRooms)
            case "--members": members = try integer(name, 2...LossBenchOptions.maximumMembers)
            case "--trace": tracePath = try value(name)
            case "--duration": durationSeconds = try seconds(name)
            case "--drain-timeout": drainTimeoutSeconds = try seconds(name)
            case "--tcp-rto-max-ms": tcpRetransmitCeilingMs = UInt32(try integer(name, 0...Int(tcpKernelRetransmitCeilingMs)))
            case "--transports":
                let text = try value(name)
                var chosen: [LossTransport] = []
                for part in text.split(separator: ",") {
                    guard let t = LossTransport(rawValue: String(part)) else {
                        throw Invalid(description: "--transports takes "
                                      + LossTransport.allCases.map(\.rawValue).joined(separator: ", ") + ", got '\(part)'")
                    }
                    if !chosen.contains(t) { chosen.append(t) }
                }
                guard !chosen.isEmpty else { throw Invalid(description: "--transports needs at least one transport") }
                transports = chosen
            case "--seed":
                let text = try value(name)
                guard let s = UInt64(text) else { throw Invalid(description: "--seed must be a whole number, got '\(text)'") }
                seed = s
            case "--out": outputDirectory = try value(name)
            case "--tcp-cc":
                let text = try value(name)
                guard !text.isEmpty, text.count <= 16, text.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                    throw Invalid(description: "--tcp-cc takes an algorithm name such as cubic or bbr, got '\(text)'")
                }
                tcpCongestionControl = text == "default" ? nil : text
            case "--link":
                let text = try value(name)
                guard let mode = LossLinkMode(rawValue: text) else { throw Invalid(description: "--link must be proxy or netns, got '\(text)'") }
                link = mode
            default:
                throw Invalid(description: "unknown option '\(name)'")
            }
            index += 1
        }
    }
}
