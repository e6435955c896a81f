// inkwire-sim: the randomized fault sweep (TigerBeetle VOPR style) over InkSim.
//
//   inkwire-sim --seeds 1-2000      sweep; one line per failure, seed first; summary at the end
//   inkwire-sim --seed N            replay one seed exactly, printing its scenario and outcome
//   --session sealed|sealed-tuned|arq|toy
//                                   the session under test: the sealed session as shipped
//                                   (default: handshake, key updates and replay window over
//                                   FakeCrypto, then the ARQ), the same with an ARQ tuning drawn
//                                   per wire, the bare ARQ (frames unsealed), or the toy
//                                   stop-and-wait session (the harness's own self-check)
//   --heal-bound-ms N               the liveness bound after healing (default 30000)
//   inkwire-sim live-stall [--seeds A-B] [--spike-ms N] [--duration-s S]
//                                   live drawing through a relay with delay spikes (LiveStall.swift)
//
// Exit codes: 0 all passed, 1 correctness failure, 2 liveness failure, 3 crash, 64 usage.
// The simulation lives in InkSim; this file only parses arguments and prints.
import Foundation
import InkProtocol
import InkSim

let exitCorrectness: Int32 = 1
let exitLiveness: Int32 = 2
let exitCrash: Int32 = 3
let exitUsage: Int32 = 64

// Hash seeds must not vary between runs of one seed: re-exec once with deterministic hashing.
if ProcessInfo.processInfo.environment["SWIFT_DETERMINISTIC_HASHING"] == nil {
    setenv("SWIFT_DETERMINISTIC_HASHING", "1", 1)
    let args = CommandLine.unsafeArgv
    execv("/proc/self/exe", args)
    // If exec fails, go on: the sweep avoids hashed iteration anyway.
}

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("inkwire-sim: \(message)\nusage: inkwire-sim (--seeds A-B | --seed N) [--session sealed|sealed-tuned|arq|toy] [--heal-bound-ms N]\n".utf8))
    exit(exitUsage)
}

if CommandLine.arguments.dropFirst().first == "live-stall" {
    exit(liveStallCommand(Array(CommandLine.arguments.dropFirst(2))))
}
var seeds: [UInt64] = []
var replay = false
var sessionKind = "sealed"
var healBoundMs: UInt64? = nil
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    let value = arguments.isEmpty ? "" : arguments.removeFirst()
    switch flag {
    case "--seeds":
        seeds = Array(seedRange(value))
    case "--seed":
        guard let s = UInt64(value) else { usage("bad --seed \(value)") }
        seeds = [s]
        replay = true
    case "--session":
        guard ["sealed", "sealed-tuned", "arq", "toy"].contains(value) else { usage("bad --session \(value)") }
        sessionKind = value
    case "--heal-bound-ms":
        guard let ms = UInt64(value) else { usage("bad --heal-bound-ms \(value)") }
        healBoundMs = ms
    default:
        usage("unknown argument \(flag)")
    }
}
if seeds.isEmpty { usage("give --seeds or --seed") }

var configuration = SweepConfiguration()
if sessionKind == "toy" {
    configuration.maxBatchSize = 1400  // the toy does not fragment
    configuration.maxBatchesPerEndpoint = 40
    configuration.healBound = .milliseconds(120_000)
}
if let healBoundMs { configuration.healBound = .milliseconds(healBoundMs) }

let chosenKind = sessionKind
let replayOne = replay
/// The sealed endpoints of the seed being replayed (their counters are printed after it).
nonisolated(unsafe) var replayedEndpoints: [SealedSimEndpoint] = []
let makeSession: (SweepSessionSpec) -> any SimReliableEndpoint = { spec in
    if chosenKind == "toy" { return StopAndWaitEndpoint() }
    if chosenKind == "arq" { return ARQSession(now: spec.now) }
    if chosenKind == "sealed" {
        let e = SealedSimEndpoint.shipped(spec)
        if replayOne { replayedEndpoints.append(e) }
        return e
    }
    if replayOne {
        let c = ARQSession.sweepConfiguration(spec)
        print("  endpoint \(spec.endpoint) tuning: window \(c.sendWindow)/\(c.receiveWindow), datagram \(c.maxDatagramSize), redundancy \(c.redundantCopies)x\(c.redundancyBytesPerDatagram) B, ack delay \(c.maxAckDelay), queue \(c.maxQueuedMessages) msgs/\(c.maxQueuedBytes) B, pending receive \(c.maxPendingReceiveBytes), seq \(c.initialSequence)/\(c.peerInitialSequence)")
    }
    let e = SealedSimEndpoint.tuned(spec)
    if replayOne { replayedEndpoints.append(e) }
    return e
}

// A crash (trap, bad access) must still print its seed first: the handler writes a line
// prepared before each run, then exits with the crash code.
nonisolated(unsafe) var crashLine = [UInt8](repeating: 0, count: 64)
nonisolated(unsafe) var crashLineLength = 0
func prepareCrashLine(seed: UInt64) {
    let text = Array("seed \(seed): crash\n".utf8)
    crashLineLength = min(text.count, crashLine.count)
    crashLine.withUnsafeMutableBufferPointer { buf in
        for i in 0 ..< crashLineLength { buf[i] = text[i] }
    }
}
for sig in [SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGFPE, SIGABRT] {
    signal(sig) { _ in
        crashLine.withUnsafeBufferPointer { _ = write(1, $0.baseAddress, crashLineLength) }
        _exit(exitCrash)
    }
}

let started = Date()
var correctness = 0
var liveness = 0
var batches = 0
var datagrams = 0
var unreachable = 0
var worstRecovery = Instant.Duration.zero
var worstRecoverySeed: UInt64 = 0
for seed in seeds {
    prepareCrashLine(seed: seed)
    if replay { print(SweepScenario(seed: seed, configuration: configuration)) }
    let outcome = SweepRunner.run(seed: seed, configuration: configuration, makeSession: makeSession)
    batches += outcome.batches
    datagrams += outcome.datagrams
    unreachable += outcome.peerUnreachableEvents
    if outcome.verdict == .pass, outcome.recovery > worstRecovery {
        worstRecovery = outcome.recovery
        worstRecoverySeed = seed
    }
    for (i, e) in replayedEndpoints.enumerated() { print("  endpoint \(i) sealing: \(e.sealedSummary)") }
    replayedEndpoints = []
    switch outcome.verdict {
    case .pass:
        if replay { print("seed \(seed): pass, \(outcome.batches) batches, \(outcome.datagrams) datagrams, recovery \(outcome.recovery.microseconds / 1000) ms, trace \(outcome.trace)") }
    case .correctness(let why):
        correctness += 1
        print("seed \(seed): correctness: \(why) (trace \(outcome.trace))")
    case .liveness(let why):
        liveness += 1
        print("seed \(seed): liveness: \(why) (trace \(outcome.trace))")
    }
    fflush(nil)
}
let seconds = Date().timeIntervalSince(started)
let passed = seeds.count - correctness - liveness
print("{\"sim\":\"sweep\",\"session\":\"\(sessionKind)\",\"seeds\":\"\(seeds.first!)-\(seeds.last!)\",\"passed\":\(passed),\"correctness_failures\":\(correctness),\"liveness_failures\":\(liveness),\"batches\":\(batches),\"datagrams\":\(datagrams),\"peer_unreachable_events\":\(unreachable),\"worst_recovery_ms\":\(worstRecovery.microseconds / 1000),\"worst_recovery_seed\":\(worstRecoverySeed),\"seconds\":\(String(format: "%.1f", seconds))}")
exit(correctness > 0 ? exitCorrectness : liveness > 0 ? exitLiveness : 0)
