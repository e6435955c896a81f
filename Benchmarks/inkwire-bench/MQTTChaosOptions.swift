import InkUV
import MQTTChaos

/// The command line of `inkwire-bench mqtt-chaos`, parsed and checked; every value has a bound.
struct MQTTChaosOptions {
    /// Longest `--duration` accepted, in seconds (one day).
    static let maximumDurationSeconds: Double = 86_400

    static let usage = """
        usage: inkwire-bench mqtt-chaos --listen HOST:PORT --forward HOST:PORT [--delay-ms D] [--jitter-ms J]
          [--duplicate-percent U] [--burst-percent B] [--burst-max N] [--seed S] [--duration SECONDS]
          (PUBLISH QoS 0/1 only: delay D plus 0..J ms each, U % sent twice, B % start a burst of 2..N
          held and released together; every other packet passes at once, in order)
        """

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    var listen: SocketAddress
    var forward: SocketAddress
    var chaos = MQTTChaosConfiguration()
    var seed: UInt64 = 1
    /// Stop after this many seconds; nil runs until SIGINT/SIGTERM.
    var durationSeconds: Double?

    init(_ arguments: [String]) throws(Invalid) {
        let known: Set<String> = [
            "--listen", "--forward", "--delay-ms", "--jitter-ms", "--duplicate-percent", "--burst-percent", "--burst-max",
            "--seed", "--duration",
        ]
        var values: [String: String] = [:]
        var index = 0
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
        func microseconds(_ name: String) throws(Invalid) -> UInt64 {
            guard let text = values[name] else { return 0 }
            let limit = Double(MQTTChaosConfiguration.maximumDelayMicroseconds) / 1000
            guard let value = Double(text), value >= 0, value <= limit else {
                throw Invalid(description: "\(name) must be from 0 to \(Int(limit)) ms, got '\(text)'")
            }
            return UInt64((value * 1000).rounded())
        }
        func fraction(_ name: String) throws(Invalid) -> Double {
            guard let text = values[name] else { return 0 }
            guard let value = Double(text), value >= 0, value <= 100 else {
                throw Invalid(description: "\(name) must be a percentage from 0 to 100, got '\(text)'")
            }
            return value / 100
        }
        listen = try address("--listen")
        forward = try address("--forward")
        var burstMax = 8
        if let text = values["--burst-max"] {
            guard let value = Int(text), value >= 2, value <= MQTTChaosConfiguration.maximumBurstLengthBound else {
                throw Invalid(description: "--burst-max must be from 2 to \(MQTTChaosConfiguration.maximumBurstLengthBound), got '\(text)'")
            }
            burstMax = value
        }
        chaos = MQTTChaosConfiguration(delayMicroseconds: try microseconds("--delay-ms"), jitterMicroseconds: try microseconds("--jitter-ms"),
                                       duplicateChance: try fraction("--duplicate-percent"), burstChance: try fraction("--burst-percent"),
                                       maximumBurstLength: burstMax)
        if let text = values["--seed"] {
            guard let value = UInt64(text) else { throw Invalid(description: "--seed must be a whole number, got '\(text)'") }
            seed = value
        }
        if let text = values["--duration"] {
            guard let value = Double(text), value > 0, value <= MQTTChaosOptions.maximumDurationSeconds else {
                throw Invalid(description: "--duration must be a positive number of seconds up to \(Int(MQTTChaosOptions.maximumDurationSeconds)), got '\(text)'")
            }
            durationSeconds = value
        }
    }
}
