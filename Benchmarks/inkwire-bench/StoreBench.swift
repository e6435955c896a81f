import Foundation
import InkStore

/// `inkwire-bench store [--durability all|always|batch|off] [--seconds 2] [--rooms 4]
///  [--payload-bytes 200] [--rate 500] [--interval-ms 2] [--dir PATH]`
///
/// Measures `SQLiteRoomLogStore` on this machine's disk, per durability mode:
/// 1. throughput: the caller appends as fast as it can for `--seconds` (flushing when the
///    backlog bound is hit), then waits until everything is durable: appends/s, commits/s,
///    batches per commit, mean and worst commit (transaction + fsync) on the writer thread;
/// 2. latency: `--rate` appends/s paced like a busy classroom, each timed from `append` to the
///    `pollDurable` that reports it: p50/p99/max, and the time `append` itself blocks the caller.
/// 3. reopen: how long opening the store with everything written above takes.
/// Prints one JSON line per mode, then a table.
func runStoreBench(_ arguments: [String]) -> Never {
    var modes = Durability.allCases
    var seconds = 2.0
    var rooms = 4
    var payloadBytes = 200
    var rate = 500
    var intervalMs = 2
    var directory = NSTemporaryDirectory() + "inkwire-store-bench-\(getpid())"
    var i = 0
    while i < arguments.count {
        let value = i + 1 < arguments.count ? arguments[i + 1] : ""
        switch arguments[i] {
        case "--durability":
            if value == "all" { modes = Durability.allCases } else if let mode = Durability(rawValue: value) { modes = [mode] } else { benchUsage("bad --durability \(value)") }
        case "--seconds": guard let v = Double(value), v > 0 else { benchUsage("bad --seconds \(value)") }; seconds = v
        case "--rooms": guard let v = Int(value), v > 0, v <= 1000 else { benchUsage("bad --rooms \(value)") }; rooms = v
        case "--payload-bytes": guard let v = Int(value), v >= 0, v <= 256 * 1024 else { benchUsage("bad --payload-bytes \(value)") }; payloadBytes = v
        case "--rate": guard let v = Int(value), v > 0, v <= 100_000 else { benchUsage("bad --rate \(value)") }; rate = v
        case "--interval-ms": guard let v = Int(value), v >= 0, v <= 1000 else { benchUsage("bad --interval-ms \(value)") }; intervalMs = v
        case "--dir": directory = value
        default: benchUsage("unknown argument \(arguments[i])")
        }
        i += 2
    }
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

    var rows: [[String]] = []
    for mode in modes {
        let path = directory + "/store-bench-\(mode.rawValue).sqlite"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        var options = SQLiteRoomLogStore.Options()
        options.durability = mode
        options.commitInterval = .milliseconds(intervalMs)
        options.limits.maxPendingOps = storeBenchBacklog
        let store: SQLiteRoomLogStore
        do { store = try SQLiteRoomLogStore(path: path, options: options) } catch { benchUsage("cannot open \(path): \(error)") }
        let payload = [UInt8](repeating: 0x5A, count: payloadBytes)
        let roomNames = (0..<rooms).map { "bench-\($0)" }
        var originSeq: UInt64 = 0
        func appendOne(at index: Int) throws(StoreError) -> (String, UInt64)? {
            originSeq += 1
            let room = roomNames[index % rooms]
            let batch = NewBatch(room: room, origin: 1, originSeq: originSeq, author: "bench", receivedAtMs: originSeq, payload: payload)
            guard case .appended(let seq) = try store.append(batch) else { return nil }
            return (room, seq)
        }

        // 1. Throughput.
        let clock = ContinuousClock()
        let start = clock.now
        let stop = start + .milliseconds(Int(seconds * 1000))
        var appended = 0
        var appendCallWorst: Duration = .zero
        while clock.now < stop {
            let before = clock.now
            do {
                _ = try appendOne(at: appended)
                appended += 1
            } catch .backlogFull {
                originSeq -= 1
                do { try store.flush() } catch { benchUsage("flush: \(error)") }
            } catch { benchUsage("append: \(error)") }
            appendCallWorst = max(appendCallWorst, clock.now - before)
            if appended % 64 == 0 { _ = store.pollDurable() }
        }
        do { try store.flush() } catch { benchUsage("flush: \(error)") }
        let elapsed = clock.now - start
        let usage = store.usage
        let throughput = Double(appended) / elapsed.seconds
        let commitsPerSecond = Double(usage.commits) / elapsed.seconds
        let perCommit = usage.commits > 0 ? Double(appended) / Double(usage.commits) : 0
        let meanCommitUs = usage.commits > 0 ? Double(usage.totalCommitMicros) / Double(usage.commits) : 0

        // 2. Latency at a paced rate.
        _ = store.pollDurable()
        var sentAt: [String: [UInt64: ContinuousClock.Instant]] = [:]
        var latencies: [Duration] = []
        var callTimes: [Duration] = []
        let pace = Duration.nanoseconds(1_000_000_000 / rate)
        let samples = max(200, min(rate * 2, 5000))
        var next = clock.now
        var index = 0
        while latencies.count < samples {
            let now = clock.now
            if index < samples && now >= next {
                let before = clock.now
                do {
                    if let (room, seq) = try appendOne(at: index) { sentAt[room, default: [:]][seq] = before }
                } catch { benchUsage("append: \(error)") }
                callTimes.append(clock.now - before)
                index += 1
                next = next + pace
            }
            let seen = clock.now
            for mark in store.pollDurable() {
                guard var pending = sentAt[mark.room] else { continue }
                for (seq, at) in pending where seq <= mark.roomSeq {
                    latencies.append(seen - at)
                    pending[seq] = nil
                }
                sentAt[mark.room] = pending
            }
            usleep(50)
        }
        store.close()
        // 3. Reopen: every room's counts are recomputed from the stored batches.
        let stored = store.usage.records
        let reopenStart = clock.now
        do { try SQLiteRoomLogStore(path: path, options: options).close() } catch { benchUsage("reopen: \(error)") }
        let reopenMs = (clock.now - reopenStart).microseconds / 1000
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

        latencies.sort()
        callTimes.sort()
        func pct(_ values: [Duration], _ p: Int) -> Double { values.isEmpty ? 0 : values[min(values.count - 1, p * values.count / 100)].microseconds }
        let json: [(String, String)] = [
            ("bench", "\"store\""), ("durability", "\"\(mode.rawValue)\""), ("rooms", "\(rooms)"), ("payload_bytes", "\(payloadBytes)"),
            ("commit_interval_ms", "\(intervalMs)"),
            ("appends_per_s", "\(Int(throughput))"), ("commits_per_s", "\(Int(commitsPerSecond))"),
            ("batches_per_commit", "\(round1(perCommit))"), ("commit_mean_us", "\(Int(meanCommitUs))"),
            ("commit_max_us", "\(usage.maxCommitMicros)"), ("append_call_max_us", "\(Int(appendCallWorst.microseconds))"),
            ("paced_rate", "\(rate)"), ("durable_p50_us", "\(Int(pct(latencies, 50)))"), ("durable_p99_us", "\(Int(pct(latencies, 99)))"),
            ("durable_max_us", "\(Int(latencies.last?.microseconds ?? 0))"), ("append_call_p99_us", "\(round1(pct(callTimes, 99)))"),
            ("stored_batches", "\(stored)"), ("reopen_ms", "\(round1(reopenMs))"),
        ]
        print("{" + json.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
        rows.append([mode.rawValue, "\(Int(throughput))", "\(round1(perCommit))", "\(Int(meanCommitUs)) / \(usage.maxCommitMicros)",
                     "\(Int(pct(latencies, 50))) / \(Int(pct(latencies, 99))) / \(Int(latencies.last?.microseconds ?? 0))",
                     "\(round1(pct(callTimes, 99)))", "\(round1(reopenMs)) (\(stored))"])
    }
    try? FileManager.default.removeItem(atPath: directory)
    func row(_ cells: [String]) -> String { "| " + cells.joined(separator: " | ") + " |" }
    print("")
    print(row(["durability", "appends/s", "batches/commit", "commit mean / max us", "append->durable p50 / p99 / max us (\(rate)/s)", "append() p99 us", "reopen ms (batches)"]))
    print(row(["---", "---", "---", "---", "---", "---", "---"]))
    for cells in rows { print(row(cells)) }
    exit(0)
}

/// The bench's backlog bound: the caller flushes when it is hit, so the final flush stays
/// short even at one fsync per batch (`always`).
private let storeBenchBacklog = 1024

private func round1(_ value: Double) -> Double { (value * 10).rounded() / 10 }

private extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var microseconds: Double { seconds * 1e6 }
}
