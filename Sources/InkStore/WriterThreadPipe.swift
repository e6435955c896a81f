import Foundation

/// Commits on a dedicated writer thread, so the daemon's single loop thread never waits for
/// a transaction or an fsync.
///
/// Why a thread: a commit with `synchronous=FULL` costs one or more fsyncs. On this project's
/// VM disk an fsync takes ~0.3 ms, but WAL checkpoints and the SD cards and eMMC of classroom
/// boxes take tens of milliseconds, which would stall every live stroke of every room if the
/// loop did it (docs/storage.md has the figures). The handoff is an ordered queue under one
/// lock, bounded by the front's backlog limits (`StoreLimits.maxPendingOps`/`maxPendingBytes`).
/// The loop learns what became durable from `drain()`, prompted by the `onDurable` wake-up
/// (wire it to `uv_async_send`).
///
/// Group commit (`batch`, `off`): the thread commits everything queued (up to
/// `maxGroupOps`) in one transaction, at most once per `interval`; a write arriving after a
/// quiet spell commits at once. `always`: one transaction per write. A failed commit (full
/// disk, I/O error) is rolled back, reported, and retried after a growing pause; the writes
/// stay queued in order.
final class WriterThreadPipe: CommitPipe, @unchecked Sendable {
    /// Most writes in one transaction (keeps one commit's latency and memory bounded).
    static let maxGroupOps = 4096
    /// Pause after the first failed commit; doubles up to `maxRetryPause`.
    static let firstRetryPause: Duration = .milliseconds(20)
    static let maxRetryPause: Duration = .milliseconds(1000)

    private let condition = NSCondition()
    // Shared state, guarded by `condition`.
    private var queue: [StoreOp] = []
    private var inFlight = false
    private var stopping = false
    private var exited = false
    /// The writer waits for work (not pacing a group commit): only then does `submit` wake it.
    private var idle = false
    private var failureCount = 0
    private var lastFailure: StoreError?
    private var report = PipeReport()

    // Owned by the writer thread after start.
    private let writer: SQLiteLogWriter
    private let groupCommit: Bool
    private let interval: Duration
    private let onDurable: (@Sendable () -> Void)?

    init(writer: SQLiteLogWriter, durability: Durability, interval: Duration, onDurable: (@Sendable () -> Void)?) {
        self.writer = writer
        self.groupCommit = durability != .always
        self.interval = interval
        self.onDurable = onDurable
        let thread = Thread { [self] in run() }
        thread.name = "inkstore-writer"
        thread.start()
    }

    func submit(_ op: StoreOp) {
        condition.lock()
        queue.append(op)
        // A writer pacing its group commit takes this write when its interval ends: waking it
        // for every append only cost a context switch each (hundreds a second in a busy daemon).
        // A full group is committed at once.
        if idle || queue.count >= Self.maxGroupOps { condition.broadcast() }
        condition.unlock()
    }

    func drain() -> PipeReport {
        condition.lock()
        defer { report = PipeReport(); condition.unlock() }
        return report
    }

    func flush() throws(StoreError) {
        condition.lock()
        let failuresBefore = failureCount
        while (!queue.isEmpty || inFlight) && failureCount == failuresBefore && !exited { condition.wait() }
        let failure = failureCount != failuresBefore ? lastFailure : (queue.isEmpty ? nil : StoreError.closed)
        condition.unlock()
        if let failure { throw failure }
    }

    /// Commits what is queued (one more try if commits are failing), then stops the thread.
    func close() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !exited { condition.wait() }
        condition.unlock()
    }

    private func run() {
        let clock = ContinuousClock()
        var lastCommitStart = clock.now - interval
        var retryPause = Self.firstRetryPause
        condition.lock()
        while true {
            idle = true
            while queue.isEmpty && !stopping { condition.wait() }
            idle = false
            if queue.isEmpty { break }
            if groupCommit {
                let due = lastCommitStart + interval
                while !stopping && queue.count < Self.maxGroupOps && clock.now < due {
                    _ = condition.wait(until: Date(timeIntervalSinceNow: seconds(due - clock.now)))
                }
            }
            let group = queue.prefix(groupCommit ? Self.maxGroupOps : 1)
            inFlight = true
            condition.unlock()

            let start = clock.now
            var failure: StoreError?
            do { try writer.apply(group) } catch { failure = error }
            let micros = microseconds(clock.now - start)
            lastCommitStart = start

            condition.lock()
            if let failure {
                inFlight = false
                failureCount += 1
                lastFailure = failure
                report.failures.append(failure)
                condition.broadcast()
                if stopping { break }  // closing: one try is all a failing disk gets
                _ = condition.wait(until: Date(timeIntervalSinceNow: seconds(retryPause)))
                retryPause = min(retryPause * 2, Self.maxRetryPause)
                continue
            }
            retryPause = Self.firstRetryPause
            queue.removeFirst(group.count)
            report.committed += group
            report.commits += 1
            report.lastCommitMicros = micros
            report.maxCommitMicros = max(report.maxCommitMicros, micros)
            report.totalCommitMicros += micros
            // Still in flight until the caller has been woken: `flush` returns after the wake-up.
            if let onDurable {
                condition.unlock()
                onDurable()
                condition.lock()
            }
            inFlight = false
            condition.broadcast()
        }
        exited = true
        condition.broadcast()
        condition.unlock()
    }

    private func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }

    private func microseconds(_ duration: Duration) -> UInt64 {
        let parts = duration.components
        return UInt64(max(0, parts.seconds)) * 1_000_000 + UInt64(max(0, parts.attoseconds / 1_000_000_000_000))
    }
}
