import Foundation
import InkCodec

/// `inkwire-bench codec --trace PATH [--runs 7] [--repeat N] [--window-ms 60]`
///
/// Cuts the trace into the 60 ms batches a live sender produces (one author), encodes each
/// with its own codec header (no transport header) and decodes it back. Speed: the whole trace
/// encoded (decoded) `repeat` times per run, median of `runs` runs, one thread, timed by the
/// thread's CPU clock (the machine may be shared). `encode_mpts` writes the batches one after
/// the other into a preallocated buffer, as a sender filling its datagram or chunk buffer does
/// (the raw-buffer `encode`); `encode_array_mpts` appends them to an array (the [UInt8] one).
/// Likewise `decode_mpts` decodes into one preallocated command buffer (the buffer `decode`),
/// `decode_array_mpts` appends to an array (the [TimedCommand] one).
/// Prints one JSON line, then a short table.
func runCodecBench(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "codec", usage: codecUsageText,
                                    options: ["--trace", "--runs", "--repeat", "--window-ms"])
    let tracePath = cli.text("--trace") ?? ""
    let runs = cli.integer("--runs", 1...1000, default: 7)
    var repeats = cli.integer("--repeat", 1...1_000_000, default: 0)
    let window = cli.integer("--window-ms", 1...3_600_000, default: Batch.liveFlushMs)
    guard !tracePath.isEmpty else { codecUsage("--trace PATH is required") }
    guard let data = FileManager.default.contents(atPath: tracePath) else { codecUsage("cannot read \(tracePath)") }
    let text = [UInt8](data)
    let trace: BenchTrace
    do { trace = try BenchTrace(text) } catch { codecUsage("bad trace: \(error)") }
    let commands = trace.commands
    let points = commands.reduce(0) { n, c in if case .point = c.command { n + 1 } else { n } }
    let batches = Batch.cut(commands, author: AuthorID(1), windowMs: window)
    if repeats == 0 { repeats = max(1, 20_000_000 / max(points, 1)) }

    // One encode pass, kept for decoding and sizes.
    var encoder = BinaryBatchEncoder()
    var encoded: [UInt8] = []
    var ends: [Int] = []
    do {
        var state = BinaryCodecState()
        for batch in batches {
            try encoder.encode(batch, state: &state, into: &encoded)
            ends.append(encoded.count)
        }
    } catch {
        codecUsage("encode failed: \(error)")
    }

    // Correctness: decode everything and compare.
    var decoded: [TimedCommand] = []
    decoded.reserveCapacity(commands.count)
    var maxError: Int64 = 0
    var mismatches = 0
    encoded.withUnsafeBytes { all in
        var state = BinaryCodecState()
        var start = 0
        for end in ends {
            do {
                _ = try BinaryBatchDecoder.decode(UnsafeRawBufferPointer(rebasing: all[start..<end]), state: &state, into: &decoded)
            } catch {
                codecUsage("decode failed: \(error)")
            }
            start = end
        }
    }
    if decoded.count != commands.count { mismatches += abs(decoded.count - commands.count) }
    for (a, b) in zip(commands, decoded) {
        if a != b { mismatches += 1 }
        if case .point(let p) = a.command, case .point(let q) = b.command {
            maxError = max(maxError, abs(Int64(p.x) - Int64(q.x)), abs(Int64(p.y) - Int64(q.y)))
        }
    }

    // Speed. Encode as a sender that fills its own buffer does (a datagram or history chunk
    // buffer): each batch written straight after the previous one into one preallocated buffer,
    // through the raw-buffer entry point. The [UInt8] entry point (one array append a batch) is
    // timed too, as `encode_array_mpts`.
    let largest = batches.map { $0.commands.count }.max() ?? 0
    let chunk = UnsafeMutableRawBufferPointer.allocate(
        byteCount: encoded.count + BinaryBatchCodec.maxEncodedBytes(commands: largest), alignment: 8)
    defer { chunk.deallocate() }
    var encodeTimes: [Double] = []
    for _ in 0..<runs {
        let t0 = threadCPUSeconds()
        for _ in 0..<repeats {
            var state = BinaryCodecState()
            var used = 0
            for batch in batches {
                used += (try? encoder.encode(batch, state: &state, into: UnsafeMutableRawBufferPointer(rebasing: chunk[used...]))) ?? 0
            }
        }
        encodeTimes.append(threadCPUSeconds() - t0)
    }
    let chunkMatches = chunk.prefix(encoded.count).elementsEqual(encoded)
    if !chunkMatches { mismatches += 1 }
    var encodeArrayTimes: [Double] = []
    var scratch: [UInt8] = []
    scratch.reserveCapacity(encoded.count + 64)
    for _ in 0..<runs {
        let t0 = threadCPUSeconds()
        for _ in 0..<repeats {
            scratch.removeAll(keepingCapacity: true)
            var state = BinaryCodecState()
            for batch in batches { _ = try? encoder.encode(batch, state: &state, into: &scratch) }
        }
        encodeArrayTimes.append(threadCPUSeconds() - t0)
    }
    // Decode as a receiver that reuses its own command buffer does: each batch's commands written
    // straight after the previous batch's into one preallocated buffer (the buffer entry point),
    // released after each pass. The [TimedCommand] entry point is timed too, as `decode_array_mpts`.
    let commandBuffer = UnsafeMutableBufferPointer<TimedCommand>.allocate(capacity: commands.count + largest)
    defer { commandBuffer.deallocate() }
    var decodeTimes: [Double] = []
    var bufferMatches = true
    encoded.withUnsafeBytes { all in
        for run in 0..<runs {
            let t0 = threadCPUSeconds()
            for _ in 0..<repeats {
                var state = BinaryCodecState()
                var start = 0
                var used = 0
                for end in ends {
                    used += (try? BinaryBatchDecoder.decode(
                        UnsafeRawBufferPointer(rebasing: all[start..<end]), state: &state,
                        into: UnsafeMutableBufferPointer(rebasing: commandBuffer[used...])))?.count ?? 0
                    start = end
                }
                if run == 0 && bufferMatches { bufferMatches = commandBuffer.prefix(used).elementsEqual(commands) }
                commandBuffer.baseAddress!.deinitialize(count: used)
            }
            decodeTimes.append(threadCPUSeconds() - t0)
        }
    }
    if !bufferMatches { mismatches += 1 }
    var decodeArrayTimes: [Double] = []
    var sink: [TimedCommand] = []
    sink.reserveCapacity(commands.count)
    encoded.withUnsafeBytes { all in
        for _ in 0..<runs {
            let t0 = threadCPUSeconds()
            for _ in 0..<repeats {
                sink.removeAll(keepingCapacity: true)
                var state = BinaryCodecState()
                var start = 0
                for end in ends {
                    _ = try? BinaryBatchDecoder.decode(UnsafeRawBufferPointer(rebasing: all[start..<end]), state: &state, into: &sink)
                    start = end
                }
            }
            decodeArrayTimes.append(threadCPUSeconds() - t0)
        }
    }
    let encodeSeconds = median(encodeTimes)
    let decodeSeconds = median(decodeTimes)
    let encodeMpts = Double(points * repeats) / encodeSeconds / 1e6
    let encodeArrayMpts = Double(points * repeats) / median(encodeArrayTimes) / 1e6
    let decodeMpts = Double(points * repeats) / decodeSeconds / 1e6
    let decodeArrayMpts = Double(points * repeats) / median(decodeArrayTimes) / 1e6
    let bytesPerPoint = Double(encoded.count) / Double(max(points, 1))
    let legacyPerPoint = Double(trace.legacyBytes) / Double(max(points, 1))

    let json: [(String, String)] = [
        ("bench", "\"codec\""),
        ("trace", "\"\(tracePath)\""),
        ("points", "\(points)"),
        ("commands", "\(commands.count)"),
        ("batches", "\(batches.count)"),
        ("legacy_bytes", "\(trace.legacyBytes)"),
        ("encoded_bytes", "\(encoded.count)"),
        ("bytes_per_point", fixed(bytesPerPoint, 3)),
        ("legacy_bytes_per_point", fixed(legacyPerPoint, 3)),
        ("encode_mpts", fixed(encodeMpts, 2)),
        ("decode_mpts", fixed(decodeMpts, 2)),
        ("encode_into", "\"buffer\""),
        ("encode_array_mpts", fixed(encodeArrayMpts, 2)),
        ("decode_into", "\"buffer\""),
        ("decode_array_mpts", fixed(decodeArrayMpts, 2)),
        ("max_error", "\(maxError)"),
        ("mismatches", "\(mismatches)"),
        ("clock", "\"thread_cpu\""),
        ("runs", "\(runs)"),
        ("repeat", "\(repeats)"),
    ]
    print("{" + json.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    print("")
    print("codec bench: \(tracePath), \(batches.count) live batches of \(window) ms, one author")
    print("  points            \(points) (\(commands.count) commands)")
    print("  legacy            \(trace.legacyBytes) B  \(fixed(legacyPerPoint, 2)) B/point (payload + 6-byte frame header)")
    print("  binary            \(encoded.count) B  \(fixed(bytesPerPoint, 3)) B/point   target <= 3.0")
    print("  encode            \(fixed(encodeMpts, 2)) Mpoints/s   target >= 20 (into a sender's buffer)")
    print("  encode to array   \(fixed(encodeArrayMpts, 2)) Mpoints/s   (the [UInt8] entry point)")
    print("  decode            \(fixed(decodeMpts, 2)) Mpoints/s   target >= 20 (into a receiver's buffer)")
    print("  decode to array   \(fixed(decodeArrayMpts, 2)) Mpoints/s   (the [TimedCommand] entry point)")
    print("  max error         \(maxError) millionths, \(mismatches) commands differ")
    exit(maxError == 0 && mismatches == 0 ? 0 : 1)
}

/// CPU time of the calling thread: "one core" even when other processes share the machine.
private func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

private func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    return s[s.count / 2]
}

private func fixed(_ v: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", v) }

private let codecUsageText = "usage: inkwire-bench codec --trace PATH [--runs 7] [--repeat N] [--window-ms 60]"

private func codecUsage(_ message: String) -> Never { BenchOptions.fail(command: "codec", usage: codecUsageText, message) }
