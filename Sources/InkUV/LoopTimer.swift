import CLibUV

/// A re-armable timer. libuv counts whole milliseconds, so deadlines given in microseconds are
/// rounded *up*: the callback never runs before the deadline (it would wake early and spin).
///
/// A timer re-armed from its own callback for a deadline already due waits one millisecond:
/// libuv 1.44 (Debian 12) runs, in one pass, every timer due at its cached loop time, which does
/// not move during the pass, so a timer re-armed there with a zero timeout runs again at once,
/// forever, and the loop never polls I/O or returns from `runOnce` (a client lingering past its
/// goodbye's deadline spun like that). libuv 1.48 defers such timers itself (libuv#4245).
///
/// Named `LoopTimer` so it does not collide with Foundation's `Timer` in modules importing both.
public final class LoopTimer: HandleOwner {
    private var handle: UnsafeMutablePointer<uv_timer_t>?
    private var callback: (() -> Void)?
    public private(set) var isClosing = false
    /// Inside this timer's callback (see the type's note on re-arming there).
    private var isFiring = false
    /// Called once when the timer has been closed and freed.
    public var onClose: (() -> Void)?

    public init(loop: EventLoop) throws(UVError) {
        let handle = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        let rc = uv_timer_init(loop.raw, handle)
        if rc < 0 {
            discardUninitialised(handle)
            throw UVError(code: rc, operation: "timer_init")
        }
        self.handle = handle
        attach(self, to: asHandle(handle))
    }

    /// Fires `callback` once the monotonic clock (`EventLoop.now`) reaches `deadline`
    /// (microseconds), replacing any earlier arming. A deadline in the past fires on the next
    /// loop round.
    public func start(atMicroseconds deadline: UInt64, _ callback: @escaping () -> Void) {
        guard let handle, !isClosing else { return }
        // libuv fires when its loop clock (whole ms, never ahead of uv_hrtime) reaches
        // uv_now + timeout, so aim at the deadline rounded up on that clock.
        let timeout = LoopTimer.timeout(until: deadline, loopNow: uv_now(handle.pointee.loop))
        self.callback = callback
        uv_timer_start(handle, timerFired, nextRound(timeout), 0)
    }

    /// Fires `callback` once `delay` microseconds have passed (never earlier), then every
    /// `interval` microseconds (rounded up to whole ms) if it is non-zero. Replaces any earlier
    /// arming.
    public func start(afterMicroseconds delay: UInt64, repeatingEveryMicroseconds interval: UInt64 = 0,
                      _ callback: @escaping () -> Void) {
        guard let handle, !isClosing else { return }
        self.callback = callback
        // libuv counts from its cached loop time, which lags the clock during callbacks: aim the
        // first firing at now + delay on the real clock so it is never early. Repeats count
        // from each firing.
        let timeout = LoopTimer.timeout(until: uv_hrtime() / 1000 &+ delay, loopNow: uv_now(handle.pointee.loop))
        uv_timer_start(handle, timerFired, nextRound(timeout), LoopTimer.roundedUpMilliseconds(interval))
    }

    /// A zero timeout set from this timer's own callback becomes one millisecond, so the timer
    /// runs in the next loop round, not again in this pass (libuv 1.44 would loop forever).
    private func nextRound(_ timeoutMilliseconds: UInt64) -> UInt64 {
        isFiring ? max(timeoutMilliseconds, 1) : timeoutMilliseconds
    }

    /// Whole milliseconds from the loop's clock to `deadline` (µs), rounded up.
    static func timeout(until deadline: UInt64, loopNow: UInt64) -> UInt64 {
        let dueMilliseconds = roundedUpMilliseconds(deadline)
        return dueMilliseconds > loopNow ? dueMilliseconds - loopNow : 0
    }

    /// Disarms the timer; it can be started again.
    public func stop() {
        guard let handle, !isClosing else { return }
        uv_timer_stop(handle)
    }

    /// Whether the timer is armed.
    public var isActive: Bool {
        guard let handle, !isClosing else { return false }
        return uv_is_active(asHandle(handle)) != 0
    }

    /// Closes the timer. Idempotent, safe inside its own callback.
    public func close() {
        guard let handle, !isClosing else { return }
        isClosing = true
        closeHandle(asHandle(handle))
    }

    func didClose() {
        handle = nil
        callback = nil
        let onClose = self.onClose
        self.onClose = nil
        onClose?()
    }

    fileprivate func fire() {
        guard !isClosing, let callback else { return }
        isFiring = true
        defer { isFiring = false }
        callback()
    }

    static func roundedUpMilliseconds(_ microseconds: UInt64) -> UInt64 {
        microseconds / 1000 + (microseconds % 1000 == 0 ? 0 : 1)
    }
}

private func timerFired(_ handle: UnsafeMutablePointer<uv_timer_t>?) {
    guard let handle, let timer = owner(asHandle(handle), as: LoopTimer.self) else { return }
    timer.fire()
}
