import Testing
import Glibc
import InkUV

@Suite(.serialized) struct TimerSignalPollTests {
    /// Deadlines all count from one base, so the order is fixed however late the loop runs.
    @Test func timersFireInDeadlineOrderAndReArm() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var fired: [String] = []
        let base = loop.now
        let a = try LoopTimer(loop: loop), b = try LoopTimer(loop: loop), c = try LoopTimer(loop: loop)
        a.start(atMicroseconds: base + 30_000) { fired.append("a") }
        b.start(atMicroseconds: base + 10_000) { fired.append("b") }
        // Re-arming replaces the earlier arming: c fires once, last.
        c.start(atMicroseconds: base + 5_000) { fired.append("c-early") }
        c.start(atMicroseconds: base + 200_000) { fired.append("c") }
        // d re-arms itself from its own callback: at 15 ms, then at 45 ms.
        let d = try LoopTimer(loop: loop)
        d.start(atMicroseconds: base + 15_000) {
            fired.append("d0")
            d.start(atMicroseconds: base + 45_000) { fired.append("d1") }
        }
        #expect(drive(loop) { fired.count == 5 })
        #expect(fired == ["b", "d0", "a", "d1", "c"])
        #expect(!a.isActive && !d.isActive)
    }

    @Test func repeatingTimerStopsFromItsCallback() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let timer = try LoopTimer(loop: loop)
        var ticks = 0
        timer.start(afterMicroseconds: 1_500, repeatingEveryMicroseconds: 2_001) {
            ticks += 1
            if ticks == 3 { timer.stop() }
        }
        #expect(timer.isActive)
        #expect(drive(loop) { ticks == 3 && !timer.isActive })
        loop.runNoWait()
        #expect(ticks == 3)
    }

    /// Absolute deadlines in microseconds are never served early despite whole-ms timers.
    @Test func absoluteDeadlinesNeverFireEarly() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let timer = try LoopTimer(loop: loop)
        var lateness: [Int64] = []
        for offset: UInt64 in [1, 250, 999, 1_001, 2_500, 3_999] {
            let deadline = loop.now + offset
            var done = false
            timer.start(atMicroseconds: deadline) {
                lateness.append(Int64(loop.now) - Int64(deadline))
                done = true
            }
            #expect(drive(loop) { done })
        }
        #expect(lateness.count == 6)
        #expect(lateness.allSatisfy { $0 >= 0 }, "fired early: \(lateness)")
    }

    /// Relative delays count from the real clock, not libuv's cached loop time.
    @Test func relativeDelaysNeverFireEarly() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let timer = try LoopTimer(loop: loop)
        var lateness: [Int64] = []
        for delay: UInt64 in [1, 500, 1_000, 1_500, 2_999] {
            // Burn a little time inside a callback so the loop's cached time is stale.
            var done = false
            let kick = try LoopTimer(loop: loop)
            kick.start(afterMicroseconds: 0) {
                let spinUntil = loop.now + 1_700
                while loop.now < spinUntil {}
                let start = loop.now
                timer.start(afterMicroseconds: delay) {
                    lateness.append(Int64(loop.now) - Int64(start + delay))
                    done = true
                }
                kick.close()
            }
            #expect(drive(loop) { done })
        }
        #expect(lateness.count == 5)
        #expect(lateness.allSatisfy { $0 >= 0 }, "fired early: \(lateness)")
    }

    /// A callback that re-arms its own timer for a deadline already passed (a client lingering
    /// past its goodbye's deadline did) runs again in the next round, not again and again in
    /// this one: libuv 1.44 would never leave its timer pass, and `runOnce` never returned.
    @Test func timerReArmedForAPassedDeadlineFromItsCallbackLetsTheLoopReturn() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let timer = try LoopTimer(loop: loop)
        let passed = loop.now - 5_000
        var fired = 0
        // Bounded so that a regression fails instead of hanging the suite.
        let bound = 100_000
        func arm() {
            timer.start(atMicroseconds: passed) {
                fired += 1
                if fired < bound { arm() }
            }
        }
        arm()
        loop.runOnce()
        // One round runs due timers before and after its poll: at most twice.
        #expect(fired <= 2, "the re-armed timer ran \(fired) times in one loop round")
        #expect(timer.isActive)
        // The same with a zero relative delay.
        var relative = 0
        func armRelative() {
            timer.start(afterMicroseconds: 0) {
                relative += 1
                if relative < bound { armRelative() }
            }
        }
        armRelative()
        loop.runOnce()
        loop.runOnce()
        #expect(relative <= 4, "ran \(relative) times in two loop rounds")
        timer.stop()
    }

    @Test func timerClosesItselfInsideItsCallback() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var timer: LoopTimer? = try LoopTimer(loop: loop)
        var fired = 0
        var closed = false
        timer?.onClose = { closed = true }
        timer?.start(afterMicroseconds: 0, repeatingEveryMicroseconds: 1_000) { [weak timer] in
            fired += 1
            timer?.close()
        }
        timer = nil  // the open handle keeps itself alive
        #expect(drive(loop) { closed })
        #expect(fired == 1)
        #expect(loop.openHandleCount == 0)
    }

    @Test func signalDeliveredToSelf() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let watcher = try Signal(loop: loop)
        var received: [Int32] = []
        try watcher.start(Signal.hangUp) { received.append($0) }
        // Process-directed, as systemd sends it (raise() targets this thread, which the test
        // runner may have SIGHUP blocked on).
        kill(getpid(), SIGHUP)
        #expect(drive(loop) { received.count == 1 })
        kill(getpid(), SIGHUP)
        #expect(drive(loop) { received.count == 2 })
        #expect(received == [SIGHUP, SIGHUP])
        watcher.close()
    }

    @Test func pollSeesAReadableDescriptor() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { Glibc.close(fds[0]); Glibc.close(fds[1]) }
        let poll = try Poll(loop: loop, fd: fds[0])
        var seen: [Poll.Events] = []
        try poll.start(.readable) { events, error in
            #expect(error == nil)
            seen.append(events)
            var byte: UInt8 = 0
            _ = read(fds[0], &byte, 1)
            poll.close()
        }
        var byte: UInt8 = 42
        #expect(write(fds[1], &byte, 1) == 1)
        var closed = false
        poll.onClose = { closed = true }
        #expect(drive(loop) { closed })
        #expect(seen == [.readable])
    }

    /// Handles left open (and unreferenced) are closed and freed by shutdown.
    @Test func shutdownClosesEverything() throws {
        let loop = try EventLoop()
        var closed = 0
        let udp = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try udp.startReceiving { _, _ in }
        udp.onClose = { closed += 1 }
        let tcp = try TCPListener(loop: loop, bindTo: .loopbackIPv6(port: 0))
        try tcp.listen { _ in }
        tcp.onClose = { closed += 1 }
        let timer = try LoopTimer(loop: loop)
        timer.start(afterMicroseconds: 1_000_000) {}
        timer.onClose = { closed += 1 }
        let signal = try Signal(loop: loop)
        try signal.start(SIGINT) { _ in }
        signal.onClose = { closed += 1 }
        #expect(loop.openHandleCount == 4)
        loop.shutdown()
        #expect(closed == 4)
        #expect(udp.isClosing && tcp.isClosing && timer.isClosing && signal.isClosing)
        loop.shutdown()
    }
}

@Suite(.serialized) struct LoopWakeupTests {
    /// Another thread wakes the loop; wakes coalesce, and every one is followed by a callback
    /// that sees the work it announced.
    @Test func wakesFromAnotherThread() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let produced = Counter()
        var seen = 0
        var callbacks = 0
        let wakeup = try LoopWakeup(loop: loop) {
            callbacks += 1
            seen = produced.value
        }
        let total = 1000
        let thread = Thread {
            for _ in 0..<total {
                produced.increment()
                wakeup.wake()
            }
        }
        thread.start()
        #expect(drive(loop) { seen == total })
        thread.join()
        #expect(callbacks >= 1 && callbacks <= total)
        wakeup.close()
        wakeup.wake()  // after close: ignored
        loop.runNoWait()
        #expect(loop.openHandleCount == 0)
    }
}

/// A counter shared between threads.
final class Counter: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
    private var count = 0
    init() { pthread_mutex_init(lock, nil) }
    deinit { pthread_mutex_destroy(lock); lock.deallocate() }
    func increment() { pthread_mutex_lock(lock); count += 1; pthread_mutex_unlock(lock) }
    var value: Int { pthread_mutex_lock(lock); defer { pthread_mutex_unlock(lock) }; return count }
}

/// A plain pthread running `body`.
final class Thread: @unchecked Sendable {
    private let body: @Sendable () -> Void
    private var thread = pthread_t()
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func start() {
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { raw in
            let me = Unmanaged<Thread>.fromOpaque(raw!).takeRetainedValue()
            me.body()
            return nil
        }, context)
    }
    func join() { pthread_join(thread, nil) }
}
