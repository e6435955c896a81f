import Foundation
import InkCodec

/// `inkwire-bench codec-entropy --trace PATH`
///
/// Checks the entropy figures that the codec's size target was derived from. They code the
/// first differences of each stroke's coordinates (in millionths), with and without a context
/// (the bit length of the same coordinate's previous difference). Each model is scored two ways:
/// - plug-in: the empirical entropy of the very samples it is measured on. With ~25,000 samples
///   spread over ~11,000 distinct values per coordinate, this mostly measures how rare each value
///   is in the sample. No coder can reach it, because a decoder does not know the sample;
/// - held out: the same model trained on every other sample and charged on the rest (two folds),
///   coding a magnitude class, its mantissa bits and a sign bit like the codec does.
/// It also estimates the hand jitter from 6th-order differences of 60 Hz runs, and what coding
/// that jitter alone costs: a lower bound for any predictor, however good its path model.
/// Prints one JSON line, then a short table.
func runCodecEntropyBench(_ arguments: [String]) -> Never {
    guard arguments.count == 2, arguments[0] == "--trace" else {
        entropyUsage("--trace PATH is required")
    }
    guard let data = FileManager.default.contents(atPath: arguments[1]) else {
        entropyUsage("cannot read \(arguments[1])")
    }
    let strokes = strokesOfTrace([UInt8](data))
    var coordinates: [CoordinateEntropy] = []
    for axis in 0..<2 {
        let samples = firstDifferences(strokes, axis: axis)
        coordinates.append(CoordinateEntropy(
            samples: samples.count,
            distinct: Set(samples.map(\.value)).count,
            pluginPlain: pluginEntropy(samples, byContext: false),
            pluginContext: pluginEntropy(samples, byContext: true),
            heldOutPlain: heldOutCost(samples, byContext: false),
            heldOutContext: heldOutCost(samples, byContext: true),
            jitterSigma: jitterSigma(strokes, axis: axis)))
    }
    let perPoint = { (bits: (CoordinateEntropy) -> Double) in (bits(coordinates[0]) + bits(coordinates[1])) / 8 }
    let jitterFloor = perPoint { log2($0.jitterSigma * (2 * Double.pi * M_E).squareRoot()) }
    let json: [(String, String)] = [
        ("bench", "\"codec-entropy\""),
        ("trace", "\"\(arguments[1])\""),
        ("strokes", "\(strokes.count)"),
        ("differences", "\(coordinates[0].samples)"),
        ("distinct_x", "\(coordinates[0].distinct)"),
        ("distinct_y", "\(coordinates[1].distinct)"),
        ("plugin_bytes_per_point", fixed3(perPoint(\.pluginPlain))),
        ("plugin_context_bytes_per_point", fixed3(perPoint(\.pluginContext))),
        ("held_out_bytes_per_point", fixed3(perPoint(\.heldOutPlain))),
        ("held_out_context_bytes_per_point", fixed3(perPoint(\.heldOutContext))),
        ("jitter_sigma_x", fixed3(coordinates[0].jitterSigma)),
        ("jitter_sigma_y", fixed3(coordinates[1].jitterSigma)),
        ("jitter_floor_bytes_per_point", fixed3(jitterFloor)),
    ]
    print("{" + json.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    print("")
    print("first differences of \(coordinates[0].samples) points in \(strokes.count) strokes (millionths;"
        + " \(coordinates[0].distinct) / \(coordinates[1].distinct) distinct values in x / y)")
    print("  model                                   plug-in    held out   (bytes per point)")
    print("  one table                               \(fixed3(perPoint(\.pluginPlain)))      \(fixed3(perPoint(\.heldOutPlain)))")
    print("  by previous difference's bit length     \(fixed3(perPoint(\.pluginContext)))      \(fixed3(perPoint(\.heldOutContext)))")
    print("  hand jitter sigma \(fixed3(coordinates[0].jitterSigma)) / \(fixed3(coordinates[1].jitterSigma)) millionths;"
        + " coding it alone costs \(fixed3(jitterFloor)) bytes per point")
    exit(0)
}

private struct CoordinateEntropy {
    var samples: Int
    var distinct: Int
    /// Bits per sample.
    var pluginPlain: Double
    var pluginContext: Double
    var heldOutPlain: Double
    var heldOutContext: Double
    /// Millionths.
    var jitterSigma: Double
}

private struct TimedPoint {
    var timeMs: UInt64
    var x: Int64
    var y: Int64
    func coordinate(_ axis: Int) -> Int64 { axis == 0 ? x : y }
}

/// One difference and its context: the bit length of the stroke's previous difference (0 first).
private struct Difference {
    var value: Int64
    var context: Int
}

/// The trace's strokes (draw and eraser), each cut where a point starts one.
private func strokesOfTrace(_ text: [UInt8]) -> [[TimedPoint]] {
    let trace: BenchTrace
    do { trace = try BenchTrace(text) } catch { entropyUsage("bad trace: \(error)") }
    var strokes: [[TimedPoint]] = []
    for timed in trace.commands {
        guard case .point(let p) = timed.command else { continue }
        let point = TimedPoint(timeMs: timed.timeMs, x: Int64(p.x), y: Int64(p.y))
        if p.phase == .start || strokes.isEmpty { strokes.append([point]) } else { strokes[strokes.count - 1].append(point) }
    }
    return strokes
}

private func firstDifferences(_ strokes: [[TimedPoint]], axis: Int) -> [Difference] {
    var out: [Difference] = []
    for stroke in strokes {
        var previous: Int64 = 0
        for i in stroke.indices.dropFirst() {
            let d = stroke[i].coordinate(axis) - stroke[i - 1].coordinate(axis)
            out.append(Difference(value: d, context: 64 - previous.magnitude.leadingZeroBitCount))
            previous = d
        }
    }
    return out
}

/// Empirical entropy of the exact values (per context), in bits per sample.
private func pluginEntropy(_ samples: [Difference], byContext: Bool) -> Double {
    var counts: [Int: [Int64: Int]] = [:]
    for s in samples { counts[byContext ? s.context : 0, default: [:]][s.value, default: 0] += 1 }
    var bits = 0.0
    for (_, values) in counts {
        let total = Double(values.values.reduce(0, +))
        for (_, c) in values { bits -= Double(c) * log2(Double(c) / total) }
    }
    return bits / Double(samples.count)
}

/// The codec's magnitude classes: |v| below 4 as itself, else 4 (k - 2) + the two bits below
/// the leading one (k = bit length), followed by k - 3 mantissa bits.
private func magnitudeClass(_ v: Int64) -> (symbol: Int, mantissaBits: Int) {
    let a = v.magnitude
    if a < 4 { return (Int(a), 0) }
    let k = 64 - a.leadingZeroBitCount
    return (4 * (k - 2) + Int((a >> UInt64(k - 3)) & 3), k - 3)
}

private let magnitudeClasses = 4 * 63

/// Bits per sample when each half is coded with the model counted on the other half
/// (add-one-half prior over every magnitude class), plus mantissa and sign bits.
private func heldOutCost(_ samples: [Difference], byContext: Bool) -> Double {
    var bits = 0.0
    for fold in 0..<2 {
        var counts: [Int: [Int: Double]] = [:]
        var totals: [Int: Double] = [:]
        for (i, s) in samples.enumerated() where i % 2 != fold {
            let context = byContext ? s.context : 0
            counts[context, default: [:]][magnitudeClass(s.value).symbol, default: 0] += 1
            totals[context, default: 0] += 1
        }
        for (i, s) in samples.enumerated() where i % 2 == fold {
            let context = byContext ? s.context : 0
            let (symbol, mantissa) = magnitudeClass(s.value)
            let p = ((counts[context]?[symbol] ?? 0) + 0.5) / ((totals[context] ?? 0) + 0.5 * Double(magnitudeClasses))
            bits += -log2(p) + Double(mantissa) + (s.value == 0 ? 0 : 1)
        }
    }
    return bits / Double(samples.count)
}

/// Robust (median-based) sigma of white noise from 6th-order differences over runs of seven
/// points one 60 Hz frame apart: for white noise their variance is C(12, 6) = 924 sigma^2, while
/// a smooth path contributes little at that order.
private func jitterSigma(_ strokes: [[TimedPoint]], axis: Int) -> Double {
    let order = 6
    let binomial: [Int64] = [1, -6, 15, -20, 15, -6, 1]
    var magnitudes: [Double] = []
    for stroke in strokes where stroke.count > order {
        for start in 0..<(stroke.count - order) {
            let run = stroke[start...(start + order)]
            guard zip(run.dropFirst(), run).allSatisfy({ $0.timeMs - $1.timeMs <= 17 }) else { continue }
            var d: Int64 = 0
            for (k, p) in run.enumerated() { d += binomial[k] * p.coordinate(axis) }
            magnitudes.append(Double(d.magnitude))
        }
    }
    guard !magnitudes.isEmpty else { return 0 }
    magnitudes.sort()
    return 1.4826 * magnitudes[magnitudes.count / 2] / Double(924).squareRoot()
}

private func fixed3(_ v: Double) -> String { String(format: "%.3f", v) }

private func entropyUsage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("inkwire-bench codec-entropy: \(message)\nusage: inkwire-bench codec-entropy --trace PATH\n".utf8))
    exit(2)
}
