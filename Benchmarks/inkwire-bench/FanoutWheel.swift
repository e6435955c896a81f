/// Something in the load generator with an ARQ deadline.
protocol FanoutTimed: AnyObject {
    /// The millisecond the wheel holds this endpoint for (`UInt64.max`: none).
    var wheelMs: UInt64 { get set }
    /// The deadline passed (or nearly: early calls are harmless to an ARQ).
    func fire(now: UInt64)
}

/// One timer for every session of the load generator: a wheel of millisecond slots, driven by
/// one 1 ms loop timer. Thousands of per-session libuv timers re-armed on every datagram would
/// cost the generator more than the sessions themselves.
final class FanoutWheel {
    /// Slots, one per millisecond; a deadline further ahead is held at the last slot and fires
    /// early there (the ARQ then asks again).
    static let slotCount = 8192

    private var slots: [[FanoutTimed]]
    /// The last millisecond processed.
    private var processedMs: UInt64

    init(nowMicroseconds: UInt64) {
        slots = Array(repeating: [], count: FanoutWheel.slotCount)
        processedMs = nowMicroseconds / 1000
    }

    /// Holds `endpoint` for `deadline` (µs; nil: no deadline). A later call replaces it.
    func schedule(_ endpoint: FanoutTimed, deadline: UInt64?) {
        guard let deadline else {
            endpoint.wheelMs = UInt64.max
            return
        }
        // Rounded up: never fire before the deadline; at least the next millisecond.
        let ms = max(min((deadline + 999) / 1000, processedMs + UInt64(FanoutWheel.slotCount) - 1), processedMs + 1)
        guard endpoint.wheelMs != ms else { return }
        endpoint.wheelMs = ms
        slots[Int(ms % UInt64(FanoutWheel.slotCount))].append(endpoint)
    }

    /// Fires every endpoint due by `now` (µs), in slot order.
    func advance(now: UInt64) {
        let nowMs = now / 1000
        while processedMs < nowMs {
            processedMs += 1
            let index = Int(processedMs % UInt64(FanoutWheel.slotCount))
            guard !slots[index].isEmpty else { continue }
            // Taken out and put back emptied, so the slot keeps its storage (firing never
            // schedules into the slot being processed: deadlines are at least a ms ahead).
            var due: [FanoutTimed] = []
            swap(&due, &slots[index])
            for endpoint in due where endpoint.wheelMs == processedMs {
                endpoint.wheelMs = UInt64.max
                endpoint.fire(now: now)
            }
            due.removeAll(keepingCapacity: true)
            swap(&due, &slots[index])
        }
    }
}

/// Latencies in 10 µs buckets up to 5 s (one counter each, no samples kept).
struct FanoutHistogram {
    static let bucketMicroseconds: UInt64 = 10
    static let bucketCount = 500_000
    private var counts = [UInt32](repeating: 0, count: FanoutHistogram.bucketCount)
    private(set) var total = 0
    private(set) var maximum: UInt64 = 0

    mutating func record(_ microseconds: UInt64) {
        let bucket = min(Int(microseconds / FanoutHistogram.bucketMicroseconds), FanoutHistogram.bucketCount - 1)
        counts[bucket] &+= 1
        total += 1
        maximum = max(maximum, microseconds)
    }

    /// The upper edge of the bucket holding the `fraction` quantile, in ms.
    func quantileMs(_ fraction: Double) -> Double {
        guard total > 0 else { return 0 }
        let rank = max(1, Int((Double(total) * fraction).rounded(.up)))
        var seen = 0
        for (i, c) in counts.enumerated() where c > 0 {
            seen += Int(c)
            if seen >= rank { return Double(UInt64(i + 1) * FanoutHistogram.bucketMicroseconds) / 1000 }
        }
        return Double(maximum) / 1000
    }
}
