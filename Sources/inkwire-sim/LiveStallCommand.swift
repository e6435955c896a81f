import Foundation
import InkProtocol
import InkSim

/// `inkwire-sim live-stall [--seeds A-B] [--spike-ms N] [--duration-s S]`: runs
/// `LiveStallScenario` (drawer -> relay -> watcher, 10 % loss, 20 ms each way, 60 ms batches)
/// per seed; prints every seed whose worst delivery took over 1 s, seed first, then a histogram
/// of the worst latency per seed. Exit 1 when a seed lost, duplicated or reordered a message.
func liveStallCommand(_ arguments: [String]) -> Int32 {
    var seeds: ClosedRange<UInt64> = 1...300
    var spikeMs: UInt64 = 0
    var durationS: UInt64 = 120
    var rest = arguments
    while !rest.isEmpty {
        let flag = rest.removeFirst()
        let value = rest.isEmpty ? "" : rest.removeFirst()
        switch flag {
        case "--seeds":
            seeds = seedRange(value)
        case "--spike-ms":
            guard let v = UInt64(value) else { usage("bad --spike-ms \(value)") }
            spikeMs = v
        case "--duration-s":
            guard let v = UInt64(value), v > 0 else { usage("bad --duration-s \(value)") }
            durationS = v
        default:
            usage("live-stall: unknown argument \(flag)")
        }
    }
    let binMs: UInt64 = 500
    var histogram = [Int](repeating: 0, count: 10)
    var over2s = 0
    var broken = 0
    for seed in seeds {
        var scenario = LiveStallScenario(seed: seed, maxSpike: .milliseconds(spikeMs))
        scenario.duration = .milliseconds(durationS * 1000)
        let o = scenario.run()
        let worstMs = o.worstLatency.microseconds / 1000
        histogram[min(histogram.count - 1, Int(worstMs / binMs))] += 1
        if worstMs > 2000 { over2s += 1 }
        let bad = o.failure != nil || o.outOfOrderDeliveries > 0 || o.corruptDeliveries > 0 || o.messagesDelivered != o.messagesSent
        if bad { broken += 1 }
        if worstMs > 1000 || bad {
            print("seed \(seed): worst \(worstMs) ms (sent at \(o.worstSentAt.microseconds / 1000) ms), \(o.messagesDelivered)/\(o.messagesSent) delivered, out of order \(o.outOfOrderDeliveries), corrupt \(o.corruptDeliveries)\(o.failure.map { ", failure: \($0)" } ?? "")")
        }
    }
    print("live-stall seeds \(seeds.lowerBound)-\(seeds.upperBound), spikes up to \(spikeMs) ms, \(durationS) s each: \(over2s) seeds over 2 s, \(broken) broken")
    print("worst latency per seed, \(binMs) ms bins: \(histogram)")
    return broken > 0 ? 1 : 0
}
