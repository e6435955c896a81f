import InkUV

/// Test bound on how long one scenario may run the loop.
let scenarioLimitMicroseconds: UInt64 = 5_000_000

/// Runs `loop` until `done()` holds or the time limit passes; returns `done()`.
/// A guard timer makes sure a blocking round wakes up by the limit.
@discardableResult
func drive(_ loop: EventLoop, limitMicroseconds: UInt64 = scenarioLimitMicroseconds, until done: () -> Bool) -> Bool {
    let deadline = loop.now + limitMicroseconds
    let guardTimer = try! LoopTimer(loop: loop)
    guardTimer.start(atMicroseconds: deadline) {}
    while !done() && loop.now < deadline {
        loop.runOnce()
    }
    guardTimer.close()
    loop.runNoWait()
    return done()
}

/// Deterministic payload bytes for datagram `index` of `length` bytes.
func payload(_ index: Int, length: Int) -> [UInt8] {
    (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7 &+ 1) }
}
