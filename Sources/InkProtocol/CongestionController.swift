/// A NewReno-style window in bytes, deliberately simple.
///
/// - Starts at `initialSegments` full segments; slow start doubles per round trip, then one
///   segment per round trip (congestion avoidance).
/// - A detected loss multiplies the window by `lossReduction` (0.7, as CUBIC does: Wi-Fi loses
///   datagrams for reasons other than congestion) once per round trip (losses of segments sent
///   before the recovery began belong to the same event); persistent congestion (RFC 9002
///   section 7.6, judged by `ARQSession`, never by probe timeouts alone) collapses it to
///   `minimumSegments`.
/// - Random loss is not congestion: once a sample of at least `minimumSampleSegments` segments
///   was acknowledged or lost, a loss while the lost share of that sample is at most
///   `randomLossTolerancePercent` keeps the window (a Wi-Fi link losing 5 % of datagrams at
///   random would otherwise hold a bulk history sync to a few hundred KB/s). Losses above that
///   share (a queue overflowing) reduce it as before; the sample decays by half every
///   `sampleDecayWindows` windows so it follows the current path. The share is taken over at
///   least `minimumSampleSegments` (one of a flow's first segments lost is 5 %, not 100 %), and
///   once `sampleDecayWindows` windows were acknowledged since a reduction with the share back
///   at random levels, slow start resumes: a window cut early by a chance cluster of random
///   losses otherwise grew one segment per round trip for the rest of a bulk sync (a 1M-point
///   sync at 5 % loss took 0.86 s or 3.2 s virtual depending on the seed).
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
    /// Lost share of the recent sample (percent of bytes) still taken as random loss.
    static let randomLossTolerancePercent = 10
    /// Segments of acknowledged or lost bytes the sample needs before a loss may be tolerated.
    static let minimumSampleSegments = 20
    /// The sample is halved once it holds this many windows of bytes.
    static let sampleDecayWindows = 8

    let segmentSize: Int
    private(set) var window: Int
    private var slowStartThreshold = Int.max
    private var recoveryStart: Instant?
    /// Bytes acknowledged and lost recently (decaying), for the random-loss test.
    private var sampleAcked = 0
    private var sampleLost = 0
    /// Bytes acknowledged since the window was last reduced.
    private var ackedSinceReduction = 0

    init(segmentSize: Int) {
        self.segmentSize = segmentSize
        self.window = segmentSize * CongestionController.initialSegments
    }

    func allows(bytesInFlight: Int, adding size: Int) -> Bool {
        bytesInFlight == 0 || bytesInFlight + size <= window
    }

    mutating func onAck(bytes: Int, sentAt: Instant, bytesInFlightBefore: Int) {
        sampleAcked += bytes
        ackedSinceReduction += bytes
        decaySample()
        // The loss that ended slow start is history (`sampleDecayWindows` windows acknowledged
        // since) and the recent loss share is that of random loss: probe upward again.
        if slowStartThreshold != Int.max, ackedSinceReduction >= window * CongestionController.sampleDecayWindows,
           sampleLost * 100 <= (sampleAcked + sampleLost) * CongestionController.randomLossTolerancePercent {
            slowStartThreshold = Int.max
        }
        if let r = recoveryStart, !(r < sentAt) { return }
        // Application-limited: do not grow a window the sender is not filling.
        guard bytesInFlightBefore * 2 >= window else { return }
        if window < slowStartThreshold {
            window += bytes
        } else {
            window += max(1, segmentSize * bytes / max(window, 1))
        }
    }

    mutating func onLoss(bytes: Int, sentAt: Instant, now: Instant) {
        sampleLost += bytes
        decaySample()
        if let r = recoveryStart, !(r < sentAt) { return }
        // Judged against at least the minimum sample: a loss among the first segments of a
        // flow (one of the first 20 is 5 %) is not yet evidence of congestion.
        let sample = max(sampleAcked + sampleLost, segmentSize * CongestionController.minimumSampleSegments)
        if sampleLost * 100 <= sample * CongestionController.randomLossTolerancePercent { return }
        recoveryStart = now
        window = max(window * CongestionController.lossReductionTenths / 10, segmentSize * CongestionController.minimumSegments)
        slowStartThreshold = window
        ackedSinceReduction = 0
    }

    mutating func onPersistentCongestion(now: Instant) {
        recoveryStart = now
        ackedSinceReduction = 0
        slowStartThreshold = max(window / 2, segmentSize * CongestionController.minimumSegments)
        window = segmentSize * CongestionController.minimumSegments
    }

    private mutating func decaySample() {
        if sampleAcked + sampleLost > window * CongestionController.sampleDecayWindows {
            sampleAcked /= 2
            sampleLost /= 2
        }
    }
}
