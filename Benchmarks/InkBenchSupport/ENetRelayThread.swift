import Glibc
import Synchronization

/// Runs an `ENetRelayServer` on a dedicated POSIX thread, for harnesses that keep the baseline
/// relay in-process. The relay is created on the caller's thread, then touched only by its own
/// thread until `stop()` joins it (ENet hosts must never be serviced from two threads).
public final class ENetRelayThread: @unchecked Sendable {
    /// How long one service round may wait, so a stop request is seen promptly.
    public static let serviceTimeoutMs: UInt32 = 5

    /// The UDP port the relay bound.
    public let port: UInt16
    private let runner: Runner
    private var thread: pthread_t
    private var joined = false

    /// Binds a relay on `host:port` (port 0 picks one) and starts servicing it.
    public init(host: String = "127.0.0.1", port: UInt16 = 0) throws(ENetError) {
        let relay = try ENetRelayServer(host: host, port: port)
        self.port = relay.port
        runner = Runner(relay: relay)
        let context = Unmanaged.passRetained(runner).toOpaque()
        var created = pthread_t()
        let rc = pthread_create(&created, nil, { raw in
            let runner = Unmanaged<Runner>.fromOpaque(raw!).takeRetainedValue()
            runner.relay.run(timeoutMs: ENetRelayThread.serviceTimeoutMs) { runner.stopRequested.load(ordering: .acquiring) }
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<Runner>.fromOpaque(context).release()
            throw .hostCreateFailed
        }
        thread = created
    }

    /// Stops the relay thread, waits for it, and returns the relay's counters.
    @discardableResult
    public func stop() -> ENetRelayServer.Stats {
        if !joined {
            runner.stopRequested.store(true, ordering: .releasing)
            pthread_join(thread, nil)
            joined = true
        }
        return runner.relay.stats
    }

    deinit { stop() }

    private final class Runner: @unchecked Sendable {
        let relay: ENetRelayServer
        let stopRequested = Atomic<Bool>(false)
        init(relay: ENetRelayServer) { self.relay = relay }
    }
}
