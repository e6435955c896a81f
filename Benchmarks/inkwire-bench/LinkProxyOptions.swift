import InkProtocol
import InkSim
import InkUV

/// The command line of `inkwire-bench link`, parsed and checked; every value has a bound.
struct LinkProxyOptions {
    /// Longest delay, jitter or reorder hold-back accepted, in milliseconds (one minute).
    static let maximumDelayMilliseconds: UInt64 = 60_000
    /// Longest `--duration` accepted, in seconds (one day).
    static let maximumDurationSeconds: Double = 86_400
    /// Highest `--rate-kbps` accepted (10 Gbit/s).
    static let maximumRateKbps: UInt64 = 10_000_000

    static let usage = """
        usage: inkwire-bench link --listen HOST:PORT --forward HOST:PORT [--loss-percent P]
          [--loss-model bernoulli|gilbert-elliott:P_GB,P_BG[,LOSS_GOOD,LOSS_BAD]] [--delay-ms D]
          [--jitter-ms J] [--reorder-percent R] [--reorder-delay-ms H] [--duplicate-percent U]
          [--rate-kbps K] [--seed S] [--duration SECONDS]
          (all Gilbert-Elliott parameters are percentages; LOSS_GOOD defaults to 0, LOSS_BAD to 100)
        """

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    var listen: SocketAddress
    var forward: SocketAddress
    /// The impairment of each direction (both directions get the same settings, separate seeds).
    var link: LinkConfiguration
    var seed: UInt64 = 1
    /// Stop after this many seconds; nil runs until SIGINT/SIGTERM.
    var durationSeconds: Double?

    init(_ arguments: [String]) throws(Invalid) {
        var values: [String: String] = [:]
        var index = 0
        let known: Set<String> = [
            "--listen", "--forward", "--loss-percent", "--loss-model", "--delay-ms", "--jitter-ms",
            "--reorder-percent", "--reorder-delay-ms", "--duplicate-percent", "--rate-kbps", "--seed", "--duration",
        ]
        while index < arguments.count {
            let name = arguments[index]
            guard known.contains(name) else { throw Invalid(description: "unknown option '\(name)'") }
            guard index + 1 < arguments.count else { throw Invalid(description: "\(name) needs a value") }
            values[name] = arguments[index + 1]
            index += 2
        }
        func address(_ name: String) throws(Invalid) -> SocketAddress {
            guard let text = values[name] else { throw Invalid(description: "\(name) HOST:PORT is required") }
            do { return try SocketAddress.parse(text) } catch { throw Invalid(description: "\(name): \(error)") }
        }
        func percent(_ text: String, _ name: String) throws(Invalid) -> Double {
            guard let value = Double(text), value >= 0, value <= 100 else {
                throw Invalid(description: "\(name) must be a percentage from 0 to 100, got '\(text)'")
            }
            return value / 100
        }
        func milliseconds(_ name: String) throws(Invalid) -> Instant.Duration? {
            guard let text = values[name] else { return nil }
            guard let value = Double(text), value >= 0, value <= Double(LinkProxyOptions.maximumDelayMilliseconds) else {
                throw Invalid(description: "\(name) must be from 0 to \(LinkProxyOptions.maximumDelayMilliseconds), got '\(text)'")
            }
            return .init(microseconds: UInt64((value * 1000).rounded()))
        }

        listen = try address("--listen")
        forward = try address("--forward")
        link = LinkConfiguration.clean(delay: .zero)
        let lossChance = try values["--loss-percent"].map { (text) throws(Invalid) in try percent(text, "--loss-percent") } ?? 0
        let model = values["--loss-model"] ?? "bernoulli"
        if model == "bernoulli" {
            link.loss = lossChance > 0 ? .bernoulli(lossChance) : .none
        } else if model.hasPrefix("gilbert-elliott:") {
            let parts = model.dropFirst("gilbert-elliott:".count).split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2 || parts.count == 4 else {
                throw Invalid(description: "--loss-model gilbert-elliott takes P_GB,P_BG or P_GB,P_BG,LOSS_GOOD,LOSS_BAD")
            }
            var p: [Double] = []
            for part in parts { p.append(try percent(String(part), "--loss-model gilbert-elliott")) }
            link.loss = .gilbertElliott(GilbertElliott(
                goodToBad: p[0], badToGood: p[1], lossWhenGood: parts.count == 4 ? p[2] : 0, lossWhenBad: parts.count == 4 ? p[3] : 1))
            if values["--loss-percent"] != nil {
                throw Invalid(description: "--loss-percent applies to the bernoulli model only")
            }
        } else {
            throw Invalid(description: "--loss-model must be bernoulli or gilbert-elliott:P_GB,P_BG[,LOSS_GOOD,LOSS_BAD]")
        }
        if let delay = try milliseconds("--delay-ms") { link.delay = delay }
        if let jitter = try milliseconds("--jitter-ms") { link.jitter = jitter }
        if let hold = try milliseconds("--reorder-delay-ms") { link.reorderDelay = hold }
        if let text = values["--reorder-percent"] { link.reorderChance = try percent(text, "--reorder-percent") }
        if let text = values["--duplicate-percent"] { link.duplicateChance = try percent(text, "--duplicate-percent") }
        if let text = values["--rate-kbps"] {
            guard let kbps = UInt64(text), kbps > 0, kbps <= LinkProxyOptions.maximumRateKbps else {
                throw Invalid(description: "--rate-kbps must be a whole number from 1 to \(LinkProxyOptions.maximumRateKbps), got '\(text)'")
            }
            link.bytesPerSecond = kbps * 1000 / 8
        }
        if let text = values["--seed"] {
            guard let value = UInt64(text) else { throw Invalid(description: "--seed must be a whole number, got '\(text)'") }
            seed = value
        }
        if let text = values["--duration"] {
            guard let value = Double(text), value > 0, value <= LinkProxyOptions.maximumDurationSeconds else {
                throw Invalid(description: "--duration must be a positive number of seconds up to \(Int(LinkProxyOptions.maximumDurationSeconds)), got '\(text)'")
            }
            durationSeconds = value
        }
    }
}
