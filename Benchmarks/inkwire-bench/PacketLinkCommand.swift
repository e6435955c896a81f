import Foundation
import Glibc
import InkSim

/// `inkwire-bench netns-link ...`: sets up a `PacketLink`, then waits for Ctrl-C, probes the
/// link, or runs a command in one namespace; at the end prints one JSON line of counters and a
/// table, and removes the namespaces (also on SIGINT, SIGTERM and SIGHUP).
func runPacketLink(_ arguments: [String]) -> Never {
    let options: PacketLinkOptions
    do {
        options = try PacketLinkOptions(arguments)
    } catch {
        FileHandle.standardError.write(Data("inkwire-bench netns-link: \(error)\n\(PacketLinkOptions.usage)\n".utf8))
        exit(64)
    }
    // Blocked before any thread starts, so every thread inherits the mask and the signals wait
    // for `sigtimedwait` below; children get a clean mask from `ChildProcess`.
    var stopSignals = sigset_t()
    sigemptyset(&stopSignals)
    for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&stopSignals, signal) }
    pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

    let link: PacketLink
    do {
        link = try PacketLink.start(configuration: options.link, seed: options.seed, prefix: options.prefix,
                                    tcpCongestionControl: options.tcpCongestionControl)
    } catch {
        FileHandle.standardError.write(Data("inkwire-bench netns-link: \(error)\n".utf8))
        exit(1)
    }
    let startedAt = Date()
    let server = link.serverNamespace.name, client = link.clientNamespace.name
    // Written at once (not through stdio's buffer): a harness reading a pipe waits for it.
    FileHandle.standardOutput.write(Data(("{\"bench\":\"netns-link\",\"event\":\"ready\",\"seed\":\(options.seed),\"server_namespace\":\"\(server)\","
        + "\"server_address\":\"\(PacketLink.serverAddress)\",\"client_namespace\":\"\(client)\","
        + "\"client_address\":\"\(PacketLink.clientAddress)\",\"device\":\"\(TunDevice.interfaceName)\"}\n").utf8))
    FileHandle.standardError.write(Data("""
        inkwire-bench netns-link: server namespace \(server) (\(PacketLink.serverAddress)), client namespace \(client) \
        (\(PacketLink.clientAddress)), device \(TunDevice.interfaceName), seed \(options.seed)

        """.utf8))

    var exitStatus: Int32 = 0
    switch options.mode {
    case .wait:
        FileHandle.standardError.write(Data("  e.g. ip netns exec \(client) ping \(PacketLink.serverAddress); Ctrl-C to stop\n".utf8))
        _ = waitForStop(&stopSignals, child: nil, durationSeconds: options.durationSeconds)
    case .command(let argv, let side):
        do {
            let pid = try link.spawn(in: side, argv)
            exitStatus = waitForStop(&stopSignals, child: pid, durationSeconds: options.durationSeconds) ?? 130
        } catch {
            FileHandle.standardError.write(Data("inkwire-bench netns-link: \(error)\n".utf8))
            exitStatus = 1
        }
    case .probe:
        do {
            for line in try PacketLinkProbe(link: link, seconds: options.probeSeconds).run() { print(line) }
        } catch {
            FileHandle.standardError.write(Data("inkwire-bench netns-link: probe: \(error)\n".utf8))
            exitStatus = 1
        }
    }
    let deviceDrops = link.deviceDrops
    link.stop()
    let elapsed = Date().timeIntervalSince(startedAt)
    print(packetLinkReportJSON(link, elapsedSeconds: elapsed, deviceDrops: deviceDrops))
    print("")
    print(packetLinkReportTable(link))
    exit(exitStatus)
}

/// Waits until a stop signal, the duration, or (when given) the child's exit; returns the child's
/// exit status (128 + signal when it was killed), or nil when it did not exit by itself.
private func waitForStop(_ signals: inout sigset_t, child: pid_t?, durationSeconds: Double?) -> Int32? {
    let deadline = durationSeconds.map { Date().addingTimeInterval($0) }
    var tick = timespec(tv_sec: 0, tv_nsec: 50_000_000)
    while true {
        if let child {
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                let signal = status & 0x7F
                return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
            }
        }
        if let deadline, Date() >= deadline { return nil }
        if sigtimedwait(&signals, nil, &tick) > 0 { return nil }
    }
}

private func packetLinkReportJSON(_ link: PacketLink, elapsedSeconds: Double, deviceDrops: (toServer: Int, toClient: Int)) -> String {
    let l = link.configuration
    let loss: String
    switch l.loss {
    case .none: loss = "\"none\""
    case .bernoulli(let p): loss = "\"bernoulli:\(p * 100)\""
    case .gilbertElliott(let g):
        loss = "\"gilbert-elliott:\(g.goodToBad * 100),\(g.badToGood * 100),\(g.lossWhenGood * 100),\(g.lossWhenBad * 100)\""
    }
    let (up, down) = link.counters
    let fields: [(String, String)] = [
        ("bench", "\"netns-link\""), ("seed", "\(link.seed)"), ("loss_model", loss),
        ("delay_ms", "\(Double(l.delay.microseconds) / 1000)"), ("jitter_ms", "\(Double(l.jitter.microseconds) / 1000)"),
        ("reorder_percent", "\(l.reorderChance * 100)"), ("duplicate_percent", "\(l.duplicateChance * 100)"),
        ("rate_kbps", "\((l.bytesPerSecond ?? 0) * 8 / 1000)"),
        ("tcp_cc", link.tcpCongestionControl.map { "\"\($0)\"" } ?? "null"), ("elapsed_s", "\((elapsedSeconds * 1000).rounded() / 1000)"),
        ("server_namespace", "\"\(link.serverNamespace.name)\""), ("client_namespace", "\"\(link.clientNamespace.name)\""),
        ("client_to_server", up.json), ("server_to_client", down.json),
        ("device_dropped_to_server", "\(deviceDrops.toServer)"), ("device_dropped_to_client", "\(deviceDrops.toClient)"),
    ]
    return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
}

private func packetLinkReportTable(_ link: PacketLink) -> String {
    let header = ["direction", "packets", "bytes", "forwarded", "dropped", "duplicated", "reordered", "queue full", "write failed", "not IPv4"]
    func row(_ name: String, _ c: PacketLinkCounters) -> String {
        "| " + [name, "\(c.packets)", "\(c.bytes)", "\(c.forwarded)", "\(c.dropped)", "\(c.duplicated)", "\(c.reordered)",
                "\(c.queueFull)", "\(c.writeFailed)", "\(c.ignored)"].joined(separator: " | ") + " |"
    }
    let (up, down) = link.counters
    return ["| " + header.joined(separator: " | ") + " |", "|" + String(repeating: " --- |", count: header.count),
            row("client -> server", up), row("server -> client", down)].joined(separator: "\n")
}
