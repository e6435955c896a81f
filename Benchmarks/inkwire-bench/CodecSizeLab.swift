import Foundation
import InkCodec

/// `inkwire-bench codec-size-lab --trace PATH [--window-ms 60]`
///
/// An offline experiment on the compact codec's size (issue 2, protocol.md 2.7): ways of
/// coding a stroke's points that the codec does not use, each charged as the codec codes
/// (magnitude class symbol, mantissa bits, sign; protocol.md 2.1) with CROSS-VALIDATED static
/// tables: strokes alternate between two halves, each half charged with tables (and any fitted
/// predictor coefficients) counted on the other. `points_bytes_per_point` covers every point's
/// coordinates (the codec's 3.15: main residuals 2.23 plus a stroke's first three points 0.92);
/// `saving` is against the `codec` row, the codec's own predictors charged the same way.
/// Then: a continuing point's end phase and frame gap coded by its speed (`LabPhase`), one-frame
/// predictors over longer histories (`LabHistory`) and the batches' byte rounding (`LabTail`).
/// One JSON line per variant, then a table.
func runCodecSizeLab(_ arguments: [String]) -> Never {
    var tracePath = ""
    var window = Batch.liveFlushMs
    var i = 0
    while i < arguments.count {
        let value = i + 1 < arguments.count ? arguments[i + 1] : ""
        switch arguments[i] {
        case "--trace": tracePath = value
        case "--window-ms": window = max(1, UInt64(value) ?? 0)
        default: sizeLabUsage("unknown argument \(arguments[i])")
        }
        i += 2
    }
    guard let data = FileManager.default.contents(atPath: tracePath) else { sizeLabUsage("cannot read \(tracePath)") }
    let trace: BenchTrace
    do { trace = try BenchTrace([UInt8](data)) } catch { sizeLabUsage("bad trace: \(error)") }
    let batches = Batch.cut(trace.commands, author: AuthorID(1), windowMs: window)
    let strokes = LabStrokes.of(batches)
    let points = strokes.reduce(0) { $0 + $1.points.count }

    var variants = [LabVariant(name: "codec", codecPredictors: true, order: .sequential, start: .anchor)]
    for start in LabStart.allCases where start != .anchor {
        variants.append(LabVariant(name: "codec+start-\(start.rawValue)", codecPredictors: true, order: .sequential, start: start))
    }
    for order in LabOrder.allCases {
        variants.append(LabVariant(name: "ls-\(order.rawValue)", codecPredictors: false, order: order, start: .anchor))
    }
    for order in LabOrder.allCases where order != .sequential {
        variants.append(LabVariant(name: "ls-\(order.rawValue)+start-choice", codecPredictors: false, order: order, start: .choice))
    }
    variants.append(LabVariant(name: "codec+first-points-y-by-x", codecPredictors: true, order: .sequential, start: .anchor, yByX: true))
    variants.append(LabVariant(name: "codec+second-drift", codecPredictors: true, order: .sequential, start: .anchor, secondDrift: true))
    variants.append(LabVariant(name: "ls-second-first+start-paused", codecPredictors: false, order: .secondFirst, start: .paused))
    variants.append(LabVariant(name: "all-above", codecPredictors: false, order: .secondFirst, start: .paused, yByX: true, secondDrift: true))
    var rows: [(String, Double, String)] = []
    for v in variants {
        let bits = crossValidatedBits(v.items(strokes))
        let perPoint = bits.total / 8 / Double(points)
        let parts = LabPart.allCases.compactMap { p in bits.byPart[p].map { (p.rawValue, $0 / 8 / Double(points), $0 / Double(bits.points[p]!)) } }
        rows.append((v.name, perPoint, parts.map { "\($0.0) \(fixed2($0.1)) (\(fixed1($0.2)))" }.joined(separator: ", ")))
        let saving = rows[0].1 - perPoint
        print("{\"bench\":\"codec-size-lab\",\"variant\":\"\(v.name)\",\"points\":\(points),\"strokes\":\(strokes.count),"
            + "\"points_bytes_per_point\":\(fixed4(perPoint)),\"saving\":\(fixed4(saving)),"
            + parts.map { "\"\($0.0)\":\(fixed4($0.1)),\"\($0.0)_bits_per_coded_point\":\(fixed2($0.2))" }.joined(separator: ",") + "}")
    }
    let phase = LabPhase(strokes)
    print("{\"bench\":\"codec-size-lab\",\"variant\":\"phase-and-gap-by-speed\",\"by_count_bytes_per_point\":\(fixed4(phase.byCountBits / 8 / Double(points))),"
        + "\"by_speed_bytes_per_point\":\(fixed4(phase.bySpeedBits / 8 / Double(points))),\"saving\":\(fixed4((phase.byCountBits - phase.bySpeedBits) / 8 / Double(points)))}")
    let history = LabHistory(strokes)
    for row in history.rows {
        print("{\"bench\":\"codec-size-lab\",\"variant\":\"history-\(row.k)\",\"samples\":\(history.samples),"
            + "\"held_out_sigma\":\(fixed1(row.sigma)),\"coefficients\":[\(row.coefficients.map(fixed2).joined(separator: ","))]}")
    }
    let tail: LabTail
    do { tail = try LabTail(batches) } catch { sizeLabUsage("encode failed: \(error)") }
    let perBatch = { (bits: Double) in bits / Double(tail.batches) }
    let perPoint = { (bits: Double) in bits / 8 / Double(points) }
    print("{\"bench\":\"codec-size-lab\",\"variant\":\"byte-rounding\",\"batches\":\(tail.batches),"
        + "\"codec_bits_per_batch\":\(fixed4(perBatch(tail.codecBits))),\"whole_bytes_bits_per_batch\":\(fixed4(perBatch(tail.wholeByteBits))),"
        + "\"shortest_tail_bits_per_batch\":\(fixed4(perBatch(tail.shortestTailBits))),"
        + "\"codec_bytes_per_point\":\(fixed4(perPoint(tail.codecBits))),\"shortest_tail_saving\":\(fixed4(perPoint(tail.codecBits - tail.shortestTailBits)))}")
    print("")
    print("\(points) points, \(strokes.count) strokes, \(batches.count) batches of \(window) ms; cross-validated over alternate strokes")
    print("  variant                              points B/pt  saving   B/pt of all points by part (bits per point coded so)")
    for (name, value, parts) in rows {
        print("  " + name.padding(toLength: 36, withPad: " ", startingAt: 0) + " " + fixed4(value) + "      " + fixed4(rows[0].1 - value) + "   " + parts)
    }
    print("  continuing points' end phase and frame gap: by remembered count \(fixed4(phase.byCountBits / 8 / Double(points))) B/pt,"
        + " also by speed \(fixed4(phase.bySpeedBits / 8 / Double(points))) (saving \(fixed4((phase.byCountBits - phase.bySpeedBits) / 8 / Double(points))))")
    print("  one-frame least-squares predictors over the last K points (\(history.samples) points after 8 one-frame steps):")
    for row in history.rows {
        print("    K = \(row.k): held-out robust sigma \(fixed1(row.sigma)) millionths, weights on past steps \(row.coefficients.map(fixed2).joined(separator: " "))")
    }
    print("  byte rounding, bits a batch: codec \(fixed4(perBatch(tail.codecBits))), whole bytes \(fixed4(perBatch(tail.wholeByteBits))),"
        + " shortest tail \(fixed4(perBatch(tail.shortestTailBits))) (saving \(fixed4(perPoint(tail.codecBits - tail.shortestTailBits))) B/pt)")
    exit(0)
}

private func fixed1(_ v: Double) -> String { String(format: "%.1f", v) }

private func fixed2(_ v: Double) -> String { String(format: "%.2f", v) }

private func fixed4(_ v: Double) -> String { String(format: "%.4f", v) }

private func sizeLabUsage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("inkwire-bench codec-size-lab: \(message)\nusage: inkwire-bench codec-size-lab --trace PATH [--window-ms 60]\n".utf8))
    exit(2)
}
