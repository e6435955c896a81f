import CENet
import Foundation

/// One subcommand of `inkwire-bench`: its name, what it measures (or `tool:` for the test tools
/// the suite runs), and its entry point, which reads its own options and exits with its status.
struct BenchSubcommand {
    let name: String
    let summary: String
    let run: ([String]) -> Never
}

let subcommands: [BenchSubcommand] = [
    BenchSubcommand(name: "codec", summary: "compact binary codec size and speed", run: runCodecBench),
    BenchSubcommand(name: "store", summary: "room log store", run: runStoreBench),
    BenchSubcommand(name: "sync", summary: "late-joiner sync of a large board", run: runSyncBench),
    BenchSubcommand(name: "fanout", summary: "relay scale on loopback", run: runFanoutBench),
    BenchSubcommand(name: "loss", summary: "packet loss: inkwired, ENet, kcptun", run: runLossBench),
    BenchSubcommand(name: "sealing", summary: "bytes sealing adds per datagram and per join; AES-GCM cost", run: runSealingBench),
    BenchSubcommand(name: "restart", summary: "UDP devices offline after a daemon crash and restart", run: runRestartBench),
    BenchSubcommand(name: "legacy", summary: "HYWhiteboard app models: late join, live", run: runLegacyBench),
    BenchSubcommand(name: "background", summary: "board backgrounds: a late joiner's strokes and image; fan-out bytes", run: runBackgroundBench),
    BenchSubcommand(name: "web", summary: "the browser client in headless Chromium: late join, stroke latency", run: runWebBench),
    BenchSubcommand(name: "bridge", summary: "N daemons bridged through mosquitto", run: runBridgeBench),
    BenchSubcommand(name: "kcp-experiment", summary: "KCP's latency test, Inkwire and real KCP", run: runKCPExperiment),
    BenchSubcommand(name: "udp-loopback", summary: "raw UDP round trips", run: runUDPLoopback),
    BenchSubcommand(name: "link", summary: "tool: UDP impairment proxy", run: runLinkProxy),
    BenchSubcommand(name: "netns-link", summary: "tool: packet-level impaired link between namespaces (root)", run: runPacketLink),
    BenchSubcommand(name: "mqtt-chaos", summary: "tool: MQTT proxy that delays, duplicates and bursts publishes", run: runMQTTChaos),
    BenchSubcommand(name: "enet-relay", summary: "tool: the ENet baseline relay", run: runENetRelay),
]

func printBenchUsage(_ subcommands: [BenchSubcommand]) {
    print("usage: inkwire-bench SUBCOMMAND [OPTIONS]   (one JSON object per line, then a table)")
    let width = subcommands.map(\.name.count).max() ?? 0
    for s in subcommands { print("  " + s.name + String(repeating: " ", count: width - s.name.count + 2) + s.summary) }
}

let arguments = Array(CommandLine.arguments.dropFirst())
if let name = arguments.first, let subcommand = subcommands.first(where: { $0.name == name }) {
    subcommand.run(Array(arguments.dropFirst()))
} else if let name = arguments.first, ["-h", "--help", "help"].contains(name) {
    printBenchUsage(subcommands)
} else {
    if let name = arguments.first { print("inkwire-bench: unknown subcommand '\(name)'") }
    printBenchUsage(subcommands)
    exit(2)
}
