import Glibc
import InkSim
import Testing
@testable import inkwire_bench

/// Runs the KCP driver, or says why it cannot (no python3, or no siokcp: .ci installs it).
private func runDriver(mode: String, seeds: [Int], lossPercent: Int = 5, linkTrace: Bool = false) throws -> [KCPExperimentKCP.Seed]? {
    let result = Result { () throws(KCPExperimentKCP.Failure) in
        try KCPExperimentKCP.run(mode: mode, seeds: seeds, lossPercent: lossPercent, python: "python3",
                                 driver: KCPExperimentKCP.defaultDriverPath, linkTrace: linkTrace)
    }
    switch result {
    case .success(let seeds):
        return seeds
    case .failure(let failure):
        guard failure.isMissing else { throw failure }
        print("KCPDriverTests: skipped, the real KCP is not available (python3 -m pip install siokcp==0.0.5): \(failure)")
        return nil
    }
}

/// Each send of `trace` ("time,peer,size,outcome") given to the Swift link with `seed`, in
/// order; the sends whose outcome differs.
private func linkMismatches(_ trace: [String], seed: UInt32) -> [String] {
    var link = KCPLatencySimulator(seed: seed)
    var mismatches: [String] = []
    for entry in trace {
        let fields = entry.split(separator: ",").map(String.init)
        guard fields.count == 4, let now = UInt64(fields[0]), let peer = Int(fields[1]), let size = Int(fields[2]),
              let side = KCPLatencySimulator.Peer(rawValue: peer) else {
            mismatches.append("unreadable \(entry)")
            continue
        }
        let expected: String
        switch link.send(from: side, [UInt8](repeating: 0, count: size), nowMs: now) {
        case .lost: expected = "D"
        case .queueFull: expected = "F"
        case .queued(let delay): expected = "\(delay)"
        }
        if expected != fields[3] { mismatches.append("\(entry): Swift link says \(expected)") }
        // Drained at once: the Swift queue never fills here (the experiment's never does).
        while link.receive(at: side == .a ? .b : .a, nowMs: .max) != nil {}
    }
    return mismatches
}

/// The driver's link is the experiment's link: every send the real KCP made in seed 3, fed in
/// the same order to the Swift `KCPLatencySimulator` with the same seed, gets the same fate
/// (lost, or the same one-way delay). So the measured KCP rows and Inkwire's row see one link.
@Test func kcpDriverLinkDecidesAsTheSwiftLink() throws {
    guard let seeds = try runDriver(mode: "fast", seeds: [3], linkTrace: true) else { return }
    let trace = seeds[0].linkTrace
    #expect(trace.count > 2000, "seed 3: \(trace.count) sends")
    let mismatches = linkMismatches(trace, seed: 3)
    #expect(mismatches.isEmpty, "seed 3: \(mismatches.prefix(5))")
    #expect(seeds[0].result.a.datagrams + seeds[0].result.b.datagrams == trace.count, "seed 3")
}

/// The real KCP completes the experiment in order in both of test.cpp's modes, the same seed
/// gives the same run, and its loss-free floor is the link's plus KCP's flush ticks.
@Test func kcpDriverRunsTheExperimentDeterministically() throws {
    guard let fast = try runDriver(mode: "fast", seeds: [1, 2]), let again = try runDriver(mode: "fast", seeds: [1, 2]),
          let normal = try runDriver(mode: "normal", seeds: [1]), let floor = try runDriver(mode: "fast", seeds: [1], lossPercent: 0)
    else { return }
    for seed in fast + normal + floor {
        #expect(seed.result.complete && seed.result.inOrder && seed.result.rtts.count >= KCPExperiment.echoesWanted,
                "seed \(seed.result.seed): \(seed.result.rtts.count) echoes")
        #expect(seed.kcp.hasPrefix("siokcp "), "seed \(seed.result.seed)")
    }
    #expect(fast.map(\.result.rtts) == again.map(\.result.rtts), "seeds 1, 2")
    #expect(fast.map(\.result.a) == again.map(\.result.a), "seeds 1, 2")
    // 5 % of A's datagrams are lost, stratified: exactly 5 of every aligned 100 (0 to 5 of the rest).
    for seed in fast {
        let whole = seed.result.a.datagrams / 100 * 5
        #expect((whole...(whole + 5)).contains(seed.result.a.lost), "seed \(seed.result.seed): \(seed.result.a)")
    }
    // Loss-free: nothing resent, echoes within the link's slowest round trip plus two 10 ms ticks.
    #expect(floor[0].result.a.lost == 0 && floor[0].result.maxRTT <= 2 * 61 + 2 * 10 + 2, "seed 1: max \(floor[0].result.maxRTT)")
}
