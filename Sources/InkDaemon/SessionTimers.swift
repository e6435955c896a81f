import InkUV

/// Every UDP session's ARQ deadline on one loop timer (see `DeadlineWheel`): the timer is armed
/// at the wheel's earliest deadline and moved only when a session needs an earlier one.
final class SessionTimers {
    private let loop: EventLoop
    private let timer: LoopTimer
    private let wheel: DeadlineWheel<NativeDatagramSession>
    /// The millisecond the loop timer is armed for.
    private var armedMilliseconds: UInt64?
    private var due: [NativeDatagramSession] = []
    private var expiring = false

    init(loop: EventLoop) throws(UVError) {
        self.loop = loop
        timer = try LoopTimer(loop: loop)
        wheel = DeadlineWheel(nowMilliseconds: loop.now / 1000)
    }

    /// Fires `session.timerFired()` once the clock reaches `deadline` (µs), never earlier,
    /// replacing its previous deadline.
    func arm(_ session: NativeDatagramSession, atMicroseconds deadline: UInt64) {
        // Rounded up: libuv counts whole milliseconds and must not fire before the deadline.
        wheel.arm(session, milliseconds: (deadline + 999) / 1000)
        if !expiring { armLoopTimer() }
    }

    func disarm(_ session: NativeDatagramSession) {
        wheel.disarm(session)
    }

    /// Entries held (superseded ones included), for tests and metrics.
    var entryCount: Int { wheel.entryCount }

    func close() {
        timer.close()
    }

    private func armLoopTimer() {
        guard let next = wheel.nextMilliseconds else { return }
        guard next != armedMilliseconds else { return }
        armedMilliseconds = next
        timer.start(atMicroseconds: next * 1000, fired)
    }

    private lazy var fired: () -> Void = { [unowned self] in
        self.armedMilliseconds = nil
        self.expiring = true
        self.wheel.expire(nowMilliseconds: self.loop.now / 1000, into: &self.due)
        for session in self.due { session.timerFired() }
        self.due.removeAll(keepingCapacity: true)
        self.expiring = false
        self.armLoopTimer()
    }
}
