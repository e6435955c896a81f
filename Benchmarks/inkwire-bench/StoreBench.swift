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
private let storeUsage = """
    usage: inkwire-bench store [--durability all|always|batch|off] [--seconds 2] [--rooms 4]
      [--payload-bytes 200] [--rate 500] [--interval-ms 2] [--dir PATH]
    """

func runStoreBench(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "store", usage: storeUsage,
                                    options: ["--durability", "--seconds", "--rooms", "--payload-bytes", "--rate", "--interval-ms", "--dir"])
    var modes = Durability.allCases
    if let text = cli.text("--durability"), text != "all" {
        guard let mode = Durability(rawValue: text) else { cli.fail("--durability takes all, always, batch or off, got '\(text)'") }
        modes = [mode]
    }
    let seconds = cli.number("--seconds", 0.001...86_400, default: 2)
    let rooms = cli.integer("--rooms", 1...1000, default: 4)
    let payloadBytes = cli.integer("--payload-bytes", 0...256 * 1024, default: 200)
    let rate = cli.integer("--rate", 1...100_000, default: 500)
    let intervalMs = cli.integer("--interval-ms", 0...1000, default: 2)
    let directory = cli.text("--dir") ?? NSTemporaryDirectory() + "inkwire-store-bench-\(getpid())"
    func storeFailed(_ message: String) -> Never {
        FileHandle.standardError.write(Data("inkwire-bench store: \(message)\n".utf8))
        exit(1)
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
        do { store = try SQLiteRoomLogStore(path: path, options: options) } catch { storeFailed("cannot open \(path): \(error)") }
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
                do { try store.flush() } catch { storeFailed("flush: \(error)") }
            } catch { storeFailed("append: \(error)") }
            appendCallWorst = max(appendCallWorst, clock.now - before)
            if appended % 64 == 0 { _ = store.pollDurable() }
        }
        do { try store.flush() } catch { storeFailed("flush: \(error)") }
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
                } catch { storeFailed("append: \(error)") }
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
        do { try SQLiteRoomLogStore(path: path, options: options).close() } catch { storeFailed("reopen: \(error)") }
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
