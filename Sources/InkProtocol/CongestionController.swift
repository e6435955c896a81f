/// A NewReno-style window in bytes, deliberately simple.
///
/// - Starts at `initialSegments` full segments; slow start doubles per round trip, then one
///   segment per round trip (congestion avoidance).
/// - A detected loss multiplies the window by `lossReduction` (0.7, as CUBIC does: Wi-Fi loses
///   datagrams for reasons other than congestion) once per round trip (losses of segments sent
///   before the recovery began belong to the same event); repeated probe timeouts collapse it
///   to `minimumSegments`.
/// - It only gates new data when bytes in flight would exceed it, and it only grows while the
///   sender actually uses it, so sparse live strokes (a few hundred bytes in flight) are never
///   held back while a bulk history transfer is paced by acknowledgements.
struct CongestionController {
    /// Initial window, in full segments (RFC 9002 uses 10).
    static let initialSegments = 10
    /// The window never falls below this many full segments.
    static let minimumSegments = 2
    /// Multiplicative decrease on loss, in tenths.
    static let lossReductionTenths = 7

    let segmentSize: Int
    private(set) var window: Int
    private var slowStartThreshold = Int.max
    private var recoveryStart: Instant?

    init(segmentSize: Int) {
        self.segmentSize = segmentSize
        self.window = segmentSize * CongestionController.initialSegments
    }

    func allows(bytesInFlight: Int, adding size: Int) -> Bool {
        bytesInFlight == 0 || bytesInFlight + size <= window
    }

    mutating func onAck(bytes: Int, sentAt: Instant, bytesInFlightBefore: Int) {
        if let r = recoveryStart, !(r < sentAt) { return }
        // Application-limited: do not grow a window the sender is not filling.
        guard bytesInFlightBefore * 2 >= window else { return }
        if window < slowStartThreshold {
            window += bytes
        } else {
            window += max(1, segmentSize * bytes / max(window, 1))
        }
    }

    mutating func onLoss(sentAt: Instant, now: Instant) {
        if let r = recoveryStart, !(r < sentAt) { return }
        recoveryStart = now
        window = max(window * CongestionController.lossReductionTenths / 10, segmentSize * CongestionController.minimumSegments)
        slowStartThreshold = window
    }

    mutating func onPersistentCongestion(now: Instant) {
        recoveryStart = now
        slowStartThreshold = max(window / 2, segmentSize * CongestionController.minimumSegments)
        window = segmentSize * CongestionController.minimumSegments
    }
}
