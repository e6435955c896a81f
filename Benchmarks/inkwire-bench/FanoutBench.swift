import Glibc
import InkCodec

/// `inkwire-bench fanout --rooms 50 --members 40 --duration 60 [--trace PATH] [--warmup S]
/// [--sessions-per-socket N] [--joins-per-second N] [--sealing on|off|both [--rounds N]]
/// [--find-max [--grow rooms|members] [--step N] [--max-sessions N] [--target-p99-ms 10]]`
///
/// Starts a real `inkwired` (release, next to this executable) on loopback with no impairment;
/// one drawer per room plays the lesson (the trace, or a synthetic lesson without one) at
/// lesson rate in 60 ms batches, rooms spread over the lesson; the other members watch over
/// native UDP sessions. Measured over `duration` after `warmup` (joins excluded): the daemon's
/// CPU (/proc/PID/stat, all threads, percent of one core), its peak RSS (VmHWM), and the
/// relay's added latency: delivery at a watcher minus the moment the drawer handed the batch
/// to its socket, same process clock. `--find-max` repeats with more rooms (or members) per
/// step, a fresh daemon each, until the added p99 passes the target or a batch goes missing.
/// Sessions are sealed as devices seal them (`--sealing on`, the default); `off` is the
/// unsealed baseline (the daemon with `--insecure-unsealed-benchmark`, members with
/// `FakeCrypto`: the same protocol without AEAD), and `both` runs `--rounds` pairs of the two,
/// alternating which goes first, a fresh daemon each, and prints their medians and ratio.
struct FanoutOptions {
    enum Sealing: String { case on, off, both }
    var shape = FanoutShape(rooms: 50, members: 40)
    var tracePath: String?
    var findMax = false
    var growMembers = false
    var step = 0
    var maxSessions = 20_000
    var targetP99Ms = 10.0
    var quiet = false
    var seed: UInt64 = 1
    /// More `inkwired` flags (`--daemon-arg --metrics --daemon-arg 127.0.0.1:9420`).
    var daemonArguments: [String] = []
    /// Another `inkwired` binary (A/B runs); default: the one next to this executable.
    var daemonBinary: String?
    var sealing = Sealing.on
    var rounds = 1
    /// With --web on: fetch the status page's /status.json this often (0: no web listener).
    var statusPollMs = 0

    init(_ arguments: [String]) throws(FanoutUsage) {
        var i = 0
        func value() throws(FanoutUsage) -> String {
            guard i + 1 < arguments.count else { throw FanoutUsage("\(arguments[i]) needs a value") }
            i += 1
            return arguments[i]
        }
        func number(_ range: ClosedRange<Double>) throws(FanoutUsage) -> Double {
            let name = arguments[i]
            let text = try value()
            guard let v = Double(text), range.contains(v) else { throw FanoutUsage("bad \(name) \(text)") }
            return v
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--rooms": shape.rooms = Int(try number(1...10_000))
            case "--members": shape.members = Int(try number(2...65_536))
            case "--duration": shape.durationSeconds = try number(0.1...86_400)
            case "--warmup": shape.warmupSeconds = try number(0...600)
            case "--sessions-per-socket": shape.sessionsPerSocket = Int(try number(1...100_000))
            case "--joins-per-second": shape.joinsPerSecond = Int(try number(1...1_000_000))
            case "--trace": tracePath = try value()
            case "--find-max": findMax = true
            case "--grow":
                let what = try value()
                guard what == "rooms" || what == "members" else { throw FanoutUsage("--grow rooms|members") }
                growMembers = what == "members"
            case "--step": step = Int(try number(1...100_000))
            case "--max-sessions": maxSessions = Int(try number(2...1_000_000))
            case "--target-p99-ms": targetP99Ms = try number(0.01...10_000)
            case "--seed": seed = UInt64(try number(0...1e15))
            case "--quiet": quiet = true
            case "--timeline": shape.timeline = true
            case "--daemon-arg": daemonArguments.append(try value())
            case "--inkwired": daemonBinary = try value()
            case "--sealing":
                guard let s = Sealing(rawValue: try value()) else { throw FanoutUsage("--sealing on|off|both") }
                sealing = s
            case "--rounds": rounds = Int(try number(1...100))
            case "--status-poll-ms": statusPollMs = Int(try number(0...60_000))
            default: throw FanoutUsage("unknown argument \(arguments[i])")
            }
            i += 1
        }
    }
}

struct FanoutUsage: Error, CustomStringConvertible {
    let description: String
    init(_ text: String) { description = text }
}

func runFanoutBench(_ arguments: [String]) -> Never {
    let options: FanoutOptions
    do { options = try FanoutOptions(arguments) } catch {
        print("inkwire-bench fanout: \(error)")
        print("usage: inkwire-bench fanout [--rooms 50] [--members 40] [--duration 60] [--trace PATH] [--warmup 5]")
        print("         [--sessions-per-socket 1000] [--joins-per-second 1000] [--find-max [--grow rooms|members] [--step N]")
        print("         [--max-sessions 20000] [--target-p99-ms 10]] [--sealing on|off|both [--rounds N]]")
        print("         [--status-poll-ms N (web listener on, GET /status.json every N ms)]")
        exit(2)
    }
    let lines: [TraceLine]
    if let path = options.tracePath {
        guard let text = FanoutDaemon.read(path), let parsed = try? Trace.parse(Array(text.utf8)) else {
            print("inkwire-bench fanout: cannot read the trace \(path)")
            exit(2)
        }
        lines = parsed
    } else {
        lines = FanoutWorkload.syntheticLines()
    }
    raiseDescriptorLimit()
    let results = runFanout(options, lines: lines) { line in
        if !options.quiet { fanoutLog("fanout: \(line)\n") }
    }
    print("")
    print("| sessions | rooms x members | sealing | daemon CPU % | RSS MB | added p50 / p99 / p99.9 / max ms | completeness | generator CPU % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results {
        print("| \(r.shape.sessions) | \(r.shape.rooms) x \(r.shape.members) | \(r.sealed ? "on" : "off") | \(fanoutFixed(r.cpuPercent, 1)) | \(fanoutFixed(r.rssMegabytes, 1)) | "
            + "\(fanoutFixed(r.addedP50Ms, 2)) / \(fanoutFixed(r.addedP99Ms, 2)) / \(fanoutFixed(r.addedP999Ms, 2)) / \(fanoutFixed(r.addedMaxMs, 2)) | "
            + "\(fanoutFixed(r.completeness, 4)) | \(fanoutFixed(r.generatorCPUPercent, 1)) |"
            + (r.statusLoads > 0 ? " status page: \(r.statusLoads) loads, p50 / p99 \(fanoutFixed(r.statusP50Ms, 2)) / \(fanoutFixed(r.statusP99Ms, 2)) ms, \(r.statusBytes) B |" : ""))
    }
    if options.sealing == .both {
        func median(_ v: [Double]) -> Double {
            let s = v.sorted()
            return s.isEmpty ? 0 : s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
        }
        let on = median(results.filter(\.sealed).map(\.cpuPercent))
        let off = median(results.filter { !$0.sealed }.map(\.cpuPercent))
        let ratio = off > 0 ? on / off : 0
        print("")
        print("{\"bench\":\"fanout-sealing\",\"rounds\":\(options.rounds),\"cpu_sealed_median\":\(fanoutFixed(on, 2)),"
            + "\"cpu_unsealed_median\":\(fanoutFixed(off, 2)),\"ratio\":\(fanoutFixed(ratio, 3))}")
        print("daemon CPU, medians of \(options.rounds): sealed \(fanoutFixed(on, 1)) %, unsealed \(fanoutFixed(off, 1)) %, ratio \(fanoutFixed(ratio, 3))")
    }
    if options.findMax {
        let sustained = results.filter { fanoutSustained($0, targetP99Ms: options.targetP99Ms) }.map(\.shape.sessions).max() ?? 0
        print("")
        print("{\"bench\":\"fanout-find-max\",\"max_sessions\":\(sustained),\"target_p99_ms\":\(fanoutFixed(options.targetP99Ms, 2))}")
        let capped = results.last.map { fanoutSustained($0, targetP99Ms: options.targetP99Ms) } ?? false
        print("max sessions sustained (added p99 <= \(fanoutFixed(options.targetP99Ms, 2)) ms, completeness 1): \(sustained)"
            + (capped ? " (every step held; the next would pass --max-sessions \(options.maxSessions))" : ""))
    }
    exit(results.allSatisfy { $0.failure == nil } || options.findMax ? 0 : 1)
}

/// Whether a step held: every batch delivered and the added p99 within the target.
func fanoutSustained(_ r: FanoutResult, targetP99Ms: Double) -> Bool {
    r.failure == nil && r.completeness >= 1 && r.errors == 0 && r.addedP99Ms <= targetP99Ms
}

/// One run, or the find-max steps; prints each JSON line as it is measured.
func runFanout(_ options: FanoutOptions, lines: [TraceLine], progress: (String) -> Void) -> [FanoutResult] {
    var results: [FanoutResult] = []
    if options.sealing == .both && !options.findMax {
        for round in 0..<options.rounds {
            // Alternate which goes first: the machine's load drifts within a round.
            for sealed in round % 2 == 0 ? [true, false] : [false, true] {
                let result = fanoutOnce(options.shape, lines: lines, seed: options.seed &+ UInt64(round), sealed: sealed,
                                        daemonArguments: options.daemonArguments, daemonBinary: options.daemonBinary,
                                        statusPollMs: options.statusPollMs, progress: progress)
                print(result.json)
                fflush(nil)
                results.append(result)
            }
        }
        return results
    }
    var shapes: [FanoutShape] = [options.shape]
    var seed = options.seed
    while let shape = shapes.popLast() {
        let result = fanoutOnce(shape, lines: lines, seed: seed, sealed: options.sealing != .off, daemonArguments: options.daemonArguments,
                                daemonBinary: options.daemonBinary, statusPollMs: options.statusPollMs, progress: progress)
        seed &+= 1
        print(result.json)
        fflush(nil)
        results.append(result)
        guard options.findMax, fanoutSustained(result, targetP99Ms: options.targetP99Ms) else { break }
        var next = shape
        if options.growMembers {
            next.members += options.step > 0 ? options.step : max(shape.members / 2, 10)
        } else {
            next.rooms += options.step > 0 ? options.step : max(options.shape.rooms, 1)
        }
        if next.sessions > options.maxSessions { break }
        shapes.append(next)
    }
    return results
}

/// A fresh daemon, the load, the result.
func fanoutOnce(_ shape: FanoutShape, lines: [TraceLine], seed: UInt64, sealed: Bool = true, daemonArguments: [String] = [],
                daemonBinary: String? = nil, statusPollMs: Int = 0, progress: (String) -> Void) -> FanoutResult {
    let lessonSeconds = Double(lines.last?.timeMs ?? 0) / 1000
    let runSeconds = shape.warmupSeconds + shape.durationSeconds + 10
    // Rooms start anywhere in the first copy and play for the run: copies enough to cover it.
    let copies = 2 + Int(runSeconds / max(lessonSeconds, 1))
    let workload = FanoutWorkload(lines: lines, copies: copies)
    let daemon: FanoutDaemon
    let webArguments = statusPollMs > 0 ? ["--web", "127.0.0.1:0"] : []
    let arguments = daemonArguments + webArguments + (sealed ? [] : [BenchSecurity.unsealedDaemonArgument])
    do { daemon = try FanoutDaemon(sessions: shape.sessions, rooms: shape.rooms, members: shape.members, extraArguments: arguments,
                                                binary: daemonBinary) } catch {
        var r = FanoutResult(shape: shape)
        r.sealed = sealed
        r.failure = "\(error)"
        return r
    }
    progress("inkwired pid \(daemon.pid) on \(daemon.udp): \(shape.rooms) rooms x \(shape.members) members, sealing \(sealed ? "on" : "off")")
    var result: FanoutResult
    let poller = statusPollMs > 0 ? daemon.web.map { StatusPoller(port: $0, everyMilliseconds: statusPollMs) } : nil
    poller?.start()
    do {
        let load = try FanoutLoad(shape: shape, workload: workload, server: daemon.udp, security: daemon.security, seed: seed)
        result = load.run(daemon: daemon, progress: progress)
    } catch {
        var r = FanoutResult(shape: shape)
        r.failure = "\(error)"
        result = r
    }
    result.sealed = sealed
    if let poller {
        let loads = poller.stop().sorted()
        result.statusLoads = loads.count
        result.statusP50Ms = loads.isEmpty ? 0 : loads[loads.count / 2]
        result.statusP99Ms = loads.isEmpty ? 0 : loads[min(loads.count - 1, loads.count * 99 / 100)]
        result.statusBytes = poller.lastBytes
        result.statusFailures = poller.failures
    }
    daemon.stop(keepLog: result.failure != nil)
    return result
}

/// Sockets are descriptors: lift the soft limit to the hard one.
func raiseDescriptorLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// A progress line on stderr (unbuffered, apart from the JSON on stdout).
func fanoutLog(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}
