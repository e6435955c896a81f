import InkProtocol

/// A toy stop-and-wait reliable endpoint: the sweep harness's self-check (`inkwire-sim --session toy`),
/// slow but correct, so a harness bug shows up apart from any real protocol. Not a protocol to use.
/// Data `[0][seq u32][batch]`, ack `[1][seq u32]`; one batch outstanding, resent every `rto`.
public final class StopAndWaitEndpoint: SimReliableEndpoint {
    /// Batches it holds before it pushes back.
    public static let queueLimit = 64
    private let rto = Instant.Duration.milliseconds(400)
    private var queue: [[UInt8]] = []
    private var sendSeq: UInt32 = 0
    private var expected: UInt32 = 0
    private var resendAt: Instant? = nil
    private var sendNow = false
    private var acks: [UInt32] = []
    private var events: [SimSessionEvent] = []

    public init() {}

    public func submit(_ batch: [UInt8]) -> SimSubmitResult {
        guard queue.count < Self.queueLimit else { return .backPressure }
        queue.append(batch)
        if queue.count == 1 { sendNow = true }
        return .accepted
    }
    public func nextSessionEvent() -> SimSessionEvent? { events.isEmpty ? nil : events.removeFirst() }
    public var memoryUse: [SimMemoryUse] { [SimMemoryUse(name: "queue", used: queue.count, limit: Self.queueLimit)] }

    public func handleDatagram(_ d: [UInt8], now: Instant) {
        guard d.count >= 5 else { return }
        let seq = (1 ..< 5).reduce(UInt32(0)) { $0 | UInt32(d[$1]) << (8 * UInt32($1 - 1)) }
        if d[0] == 0 {
            if seq == expected {
                events.append(.delivered(Array(d[5...])))
                expected &+= 1
            }
            acks.append(seq)
        } else if seq == sendSeq, !queue.isEmpty {
            queue.removeFirst()
            sendSeq &+= 1
            resendAt = nil
            sendNow = !queue.isEmpty
        }
    }
    public func handleTimeout(now: Instant) {
        if let r = resendAt, r <= now { sendNow = true }
    }
    public func pollTransmit(now: Instant) -> [UInt8]? {
        if let seq = acks.first {
            acks.removeFirst()
            return [1] + le(seq)
        }
        guard sendNow, let batch = queue.first else { return nil }
        sendNow = false
        resendAt = now + rto
        return [0] + le(sendSeq) + batch
    }
    public func pollTimeout() -> Instant? { queue.isEmpty ? nil : resendAt }
    private func le(_ v: UInt32) -> [UInt8] { (0 ..< 4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }
}
