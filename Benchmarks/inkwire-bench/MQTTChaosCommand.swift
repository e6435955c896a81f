import Foundation
import InkBenchSupport
import InkUV
import MQTTChaos

/// `inkwire-bench mqtt-chaos ...`: the MQTT chaos proxy standalone. Prints `ready listen=ADDR`
/// once accepting (so a harness can start it as a process), then on SIGINT, SIGTERM or after
/// `--duration` one JSON line of counters and a table.
func runMQTTChaos(_ arguments: [String]) -> Never {
    let options: MQTTChaosOptions
    do {
        options = try MQTTChaosOptions(arguments)
    } catch {
        FileHandle.standardError.write(Data("inkwire-bench mqtt-chaos: \(error)\n\(MQTTChaosOptions.usage)\n".utf8))
        exit(64)
    }
    do {
        let loop = try EventLoop()
        let proxy = try MQTTChaosProxy(loop: loop, listen: options.listen, forward: options.forward,
                                       configuration: options.chaos, seed: options.seed)
        let startedAt = loop.now
        var watchers: [Signal] = []
        for signal in [Signal.interrupt, Signal.terminate] {
            let watcher = try Signal(loop: loop)
            try watcher.start(signal) { _ in loop.stop() }
            watchers.append(watcher)
        }
        let stopTimer = try LoopTimer(loop: loop)
        if let seconds = options.durationSeconds {
            stopTimer.start(afterMicroseconds: UInt64(seconds * 1_000_000)) { loop.stop() }
        }
        print("ready listen=\(proxy.listenAddress.map { "\($0)" } ?? "?") forward=\(options.forward) seed=\(options.seed)")
        fflush(nil)
        _ = loop.run()
        let elapsed = Double(loop.now - startedAt) / 1_000_000
        print(mqttChaosReportJSON(proxy, options: options, elapsedSeconds: elapsed))
        print("")
        print(mqttChaosReportTable(proxy))
        proxy.close()
        stopTimer.close()
        watchers.forEach { $0.close() }
        loop.shutdown()
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("inkwire-bench mqtt-chaos: \(error)\n".utf8))
        exit(1)
    }
}

func mqttChaosReportJSON(_ proxy: MQTTChaosProxy, options: MQTTChaosOptions, elapsedSeconds: Double) -> String {
    let c = options.chaos
    let fields: [(String, String)] = [
        ("bench", "\"mqtt-chaos\""), ("seed", "\(options.seed)"), ("delay_ms", "\(Double(c.delayMicroseconds) / 1000)"),
        ("jitter_ms", "\(Double(c.jitterMicroseconds) / 1000)"), ("duplicate_percent", "\(c.duplicateChance * 100)"),
        ("burst_percent", "\(c.burstChance * 100)"), ("burst_max", "\(c.maximumBurstLength)"), ("elapsed_s", "\(elapsedSeconds)"),
        ("connections", "\(proxy.connectionsAccepted)"), ("connections_refused", "\(proxy.connectionsRefused)"),
        ("framing_errors", "\(proxy.framingErrors)"), ("upstream_failures", "\(proxy.upstreamFailures)"),
        ("client_to_broker", proxy.counters(from: .client).json), ("broker_to_client", proxy.counters(from: .broker).json),
    ]
    return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
}

func mqttChaosReportTable(_ proxy: MQTTChaosProxy) -> String {
    let header = ["direction", "packets", "publishes", "delayed", "duplicated", "burst held", "overtaken", "max depth", "surplus acks", "forwarded"]
    func row(_ name: String, _ c: MQTTChaosCounters) -> String {
        "| " + [name, "\(c.packets)", "\(c.publishes)", "\(c.delayed)", "\(c.duplicated)", "\(c.burstHeld)", "\(c.overtaken)",
                "\(c.maximumOvertakenDepth)", "\(c.surplusAcksDropped)", "\(c.forwarded)"].joined(separator: " | ") + " |"
    }
    return ["| " + header.joined(separator: " | ") + " |", "|" + String(repeating: " --- |", count: header.count),
            row("client -> broker", proxy.counters(from: .client)), row("broker -> client", proxy.counters(from: .broker))].joined(separator: "\n")
}
