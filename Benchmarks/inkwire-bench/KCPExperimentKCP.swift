import Foundation
import InkSim

/// The real C KCP in KCP's latency experiment: `Benchmarks/kcp-experiment/kcp_experiment.py`
/// drives PyPI's `siokcp` binding (pinned in .ci/pip-test-packages.txt) through the experiment's
/// link and workload, one JSON line per seed, which become `KCPExperiment.Result`s here so the
/// KCP rows are pooled exactly as Inkwire's.
enum KCPExperimentKCP {
    /// test.cpp's modes the bench runs by default ("default", the TCP-like mode, on request).
    static let defaultModes = ["normal", "fast"]
    static let modes = ["default", "normal", "fast"]
    /// The driver's exit status when the binding is not installed.
    static let bindingMissingStatus: Int32 = 3
    /// Most bytes of driver output read (50 seeds with link traces are about 3 MB).
    static let maximumOutputBytes = 256 << 20

    struct Failure: Error, CustomStringConvertible {
        let description: String
        /// The binding (or Python) is not there: the run says so instead of failing.
        var isMissing = false
    }

    /// The driver script in this checkout (next to this bench's sources).
    static var defaultDriverPath: String {
        let here = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).dropLast(2).joined(separator: "/")
        return here + "/kcp-experiment/kcp_experiment.py"
    }

    /// One seed as the driver reported it, with the link's decisions when asked for.
    struct Seed {
        var result: KCPExperiment.Result
        /// "time,peer,size,outcome" per send (outcome: the delay in ms, D lost, F queue full).
        var linkTrace: [String]
        var kcp: String
    }

    /// Runs `mode` over `seeds` with `python` and the driver at `driver`.
    static func run(mode: String, seeds: [Int], lossPercent: Int, python: String, driver: String,
                    linkTrace: Bool = false) throws(Failure) -> [Seed] {
        guard access(driver, R_OK) == 0 else { throw Failure(description: "the KCP driver \(driver) is not readable", isMissing: true) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [python, driver, "--mode", mode, "--loss-percent", "\(lossPercent)",
                             "--seeds", seeds.map(String.init).joined(separator: ",")] + (linkTrace ? ["--link-trace"] : [])
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot start \(python): \(error)", isMissing: true)
        }
        let collected = ErrorCollector(errors.fileHandleForReading)
        var bytes = Data()
        while true {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            if bytes.count + chunk.count > maximumOutputBytes {
                process.terminate()
                throw Failure(description: "the KCP driver wrote more than \(maximumOutputBytes) bytes")
            }
            bytes.append(chunk)
        }
        process.waitUntilExit()
        let stderrText = collected.text
        guard process.terminationStatus == 0 else {
            let missing = process.terminationStatus == bindingMissingStatus || process.terminationStatus == 127
            throw Failure(description: "the KCP driver (\(python) \(driver)) exited with \(process.terminationStatus): "
                          + stderrText.trimmingCharacters(in: .whitespacesAndNewlines), isMissing: missing)
        }
        var seedsRead: [Seed] = []
        for line in bytes.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
            seedsRead.append(try parse(Data(line)))
        }
        guard seedsRead.count == seeds.count else {
            throw Failure(description: "the KCP driver reported \(seedsRead.count) seeds of \(seeds.count)")
        }
        return seedsRead
    }

    static func parse(_ line: Data) throws(Failure) -> Seed {
        guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
              let seed = object["seed"] as? Int, let rtts = object["rtts"] as? [Int],
              let inOrder = object["in_order"] as? Bool, let complete = object["complete"] as? Bool,
              let a = object["a"] as? [String: Int], let b = object["b"] as? [String: Int],
              let duration = object["duration_ms"] as? Int
        else { throw Failure(description: "unreadable line from the KCP driver: \(String(decoding: line.prefix(200), as: UTF8.self))") }
        func stats(_ d: [String: Int]) -> KCPLatencySimulator.DirectionStats {
            .init(datagrams: d["datagrams"] ?? 0, bytes: d["bytes"] ?? 0, lost: d["lost"] ?? 0, queueDropped: d["queue_dropped"] ?? 0)
        }
        var result = KCPExperiment.Result(seed: UInt32(truncatingIfNeeded: seed))
        result.rtts = rtts.map { UInt32(truncatingIfNeeded: $0) }
        result.inOrder = inOrder
        result.complete = complete
        result.a = stats(a)
        result.b = stats(b)
        result.durationMs = UInt64(max(duration, 0))
        return Seed(result: result, linkTrace: object["link_trace"] as? [String] ?? [], kcp: object["kcp"] as? String ?? "?")
    }

    /// Reads a pipe to its end on its own thread (so a chatty stderr cannot block the driver).
    private final class ErrorCollector: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        private let done = DispatchSemaphore(value: 0)

        init(_ handle: FileHandle) {
            Thread.detachNewThread { [self] in
                let all = handle.readDataToEndOfFile()
                lock.lock()
                data = all.prefix(64 << 10)
                lock.unlock()
                done.signal()
            }
        }

        var text: String {
            done.wait()
            lock.lock()
            defer { lock.unlock() }
            return String(decoding: data, as: UTF8.self)
        }
    }
}
