import Glibc
import InkBenchSupport

/// Set by SIGINT/SIGTERM so the relay loop ends and ENet is torn down at exit.
nonisolated(unsafe) private var enetRelayStopRequested: sig_atomic_t = 0

/// `inkwire-bench enet-relay [--listen HOST:PORT]`: runs the ENet baseline relay standalone
/// (default 127.0.0.1:0), printing `ready port=N` once bound so a harness can start it as a real
/// process; on SIGINT/SIGTERM prints its counters and exits 0.
func runENetRelay(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "enet-relay", usage: "usage: inkwire-bench enet-relay [--listen 127.0.0.1:0]", options: ["--listen"])
    let listen = cli.text("--listen") ?? "127.0.0.1:0"
    guard let (host, port) = parseENetListen(listen) else {
        enetRelayFail("--listen wants HOST:PORT, got \(listen)", code: 2)
    }
    let relay: ENetRelayServer
    do {
        relay = try ENetRelayServer(host: host, port: port)
    } catch {
        enetRelayFail("cannot listen on \(listen): \(error)", code: 1)
    }
    // A parent may have blocked these signals (the mask is inherited); the relay must see them.
    var stopSignals = sigset_t()
    sigemptyset(&stopSignals)
    sigaddset(&stopSignals, SIGINT)
    sigaddset(&stopSignals, SIGTERM)
    sigprocmask(SIG_UNBLOCK, &stopSignals, nil)
    signal(SIGINT) { _ in enetRelayStopRequested = 1 }
    signal(SIGTERM) { _ in enetRelayStopRequested = 1 }
    print("ready port=\(relay.port)")
    fflush(nil)
    relay.run(timeoutMs: 5) { enetRelayStopRequested != 0 }
    let stats = relay.stats
    print("stopped joins=\(stats.joins) batches_in=\(stats.batchesIn) packets_out=\(stats.packetsOut) "
        + "dropped_oversized=\(stats.droppedOversized) dropped_before_join=\(stats.droppedBeforeJoin) "
        + "slow_disconnected=\(stats.slowMembersDisconnected)")
    fflush(nil)
    exit(0)
}

/// Writes `enet-relay: message` to stderr (fd 2) and exits with `code`.
private func enetRelayFail(_ message: String, code: Int32) -> Never {
    let line = Array("enet-relay: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(code)
}
