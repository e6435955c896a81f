import CLibUV
import Glibc

/// One libuv loop, driven from a single thread; every callback of every handle created on it
/// runs on that thread, inside `run`, `runOnce` or `runNoWait`.
///
/// Handles (sockets, timers, signals, polls) keep themselves alive while open: dropping the last
/// Swift reference does not close them. `shutdown()` (also run by `deinit`) closes every handle
/// still open, lets their close callbacks free them, and closes the loop.
public final class EventLoop {
    let raw: UnsafeMutablePointer<uv_loop_t>
    private var isShutDown = false

    /// Bound on loop rounds `shutdown()` spends draining close callbacks before giving up.
    static let maximumShutdownRounds = 1000

    /// Also sets SIGPIPE to be ignored, process-wide: libuv writes streams with write(2), and a
    /// peer that resets a TCP connection must cost an EPIPE error, not the whole process.
    public init() throws(UVError) {
        signal(SIGPIPE, SIG_IGN)
        raw = .allocate(capacity: 1)
        let rc = uv_loop_init(raw)
        if rc < 0 {
            raw.deallocate()
            throw UVError(code: rc, operation: "loop_init")
        }
    }

    deinit { shutdown() }

    /// Monotonic microseconds since an arbitrary origin (uv_hrtime), for `InkProtocol.Instant`.
    /// `LoopTimer.start(atMicroseconds:)` takes deadlines on this clock.
    public var now: UInt64 { uv_hrtime() / 1000 }

    /// Runs until `stop()` is called or no active handle is left.
    /// Returns true if it returned while handles were still active.
    @discardableResult
    public func run() -> Bool { uv_run(raw, UV_RUN_DEFAULT) != 0 }

    /// Waits for and handles one round of events. Returns true if more work is pending.
    @discardableResult
    public func runOnce() -> Bool { uv_run(raw, UV_RUN_ONCE) != 0 }

    /// Handles what is ready without blocking. Returns true if more work is pending.
    @discardableResult
    public func runNoWait() -> Bool { uv_run(raw, UV_RUN_NOWAIT) != 0 }

    /// Makes the current `run` return after this round of callbacks.
    public func stop() { uv_stop(raw) }

    /// Whether the loop has active handles or requests.
    public var isAlive: Bool { uv_loop_alive(raw) != 0 }

    /// Number of InkUV handles on this loop that are open (not closing or closed).
    public var openHandleCount: Int {
        var count = 0
        withUnsafeMutablePointer(to: &count) { counter in
            uv_walk(raw, { handle, arg in
                guard let handle, handle.pointee.data != nil, uv_is_closing(handle) == 0 else { return }
                arg!.assumingMemoryBound(to: Int.self).pointee += 1
            }, counter)
        }
        return count
    }

    /// Starts closing every handle on this loop (for shutdown). Close callbacks run on the next
    /// loop round; `shutdown()` runs them.
    public func closeAll() {
        uv_walk(raw, { handle, _ in
            guard let handle, let owner = handleOwner(handle) else { return }
            owner.close()
        }, nil)
    }

    /// Closes every handle, runs their close callbacks (freeing them), then closes the loop.
    /// Idempotent; the loop must not be run afterwards.
    public func shutdown() {
        if isShutDown { return }
        isShutDown = true
        closeAll()
        var rounds = 0
        // Close callbacks and cancelled requests complete within a round or two.
        while uv_run(raw, UV_RUN_NOWAIT) != 0 && rounds < EventLoop.maximumShutdownRounds {
            closeAll()
            rounds += 1
        }
        let rc = uv_loop_close(raw)
        if rc == 0 {
            raw.deallocate()
        } else {
            // A handle libuv still tracks would be freed under it: leak the loop instead.
            assertionFailure("uv_loop_close: \(UVError(code: rc, operation: "loop_close"))")
        }
    }
}
