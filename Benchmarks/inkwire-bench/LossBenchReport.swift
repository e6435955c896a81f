import Glibc

/// The human half of a loss run's output: a markdown table and one latency CDF per loss level.
enum LossBenchReport {
    static func table(_ results: [LossRunResult]) -> String {
        let header = ["transport", "loss %", "link", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "complete",
                      "wire B/point", "daemon CPU s", "daemon RSS MB"]
        var lines = ["| " + header.joined(separator: " | ") + " |", "|" + String(repeating: " --- |", count: header.count)]
        for r in results {
            let cells = [r.transport, number(r.lossPercent), r.link + (r.interrupted ? " (interrupted)" : ""),
                         number(r.percentileMs(0.5)), number(r.percentileMs(0.99)), number(r.percentileMs(0.999)),
                         number(r.percentileMs(1)), number(r.completeness * 100, places: 2) + " %", number(r.wireBytesPerPoint),
                         number(r.daemonCPUSeconds, places: 2), number(r.daemonRSSMegabytes)]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        let legacy = results.filter { $0.legacyWatchers > 0 }
        if !legacy.isEmpty {
            lines += ["", "Legacy app watching room 0 through its tunnel (points, undo, redo, clear; pen styles not counted):", "",
                      "| transport | loss % | p50 ms | p99 ms | max ms | complete | messages | kcptun server CPU s | kcptun clients CPU s |",
                      "|" + String(repeating: " --- |", count: 9)]
            for r in legacy {
                let cells = [r.transport, number(r.lossPercent), number(r.legacyPercentileMs(0.5)), number(r.legacyPercentileMs(0.99)),
                             number(r.legacyPercentileMs(1)), number(r.legacyCompleteness * 100, places: 2) + " %", "\(r.legacyExpected)",
                             number(r.tunnelServerCPUSeconds ?? 0, places: 2), number(r.tunnelClientCPUSeconds ?? 0, places: 2)]
                lines.append("| " + cells.joined(separator: " | ") + " |")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// `value` with at most `places` decimals (no Foundation formatting).
    static func number(_ value: Double, places: Int = 1) -> String {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let scaled = Int((value * scale).rounded())
        guard places > 0 else { return "\(scaled)" }
        let whole = scaled / Int(scale), fraction = abs(scaled % Int(scale))
        var digits = "\(fraction)"
        while digits.count < places { digits = "0" + digits }
        return (scaled < 0 && whole == 0 ? "-" : "") + "\(whole).\(digits)"
    }

    // MARK: SVG

    static let width = 720.0, height = 420.0
    static let left = 70.0, right = 170.0, top = 40.0, bottom = 50.0
    /// Deepest tail drawn: the y axis reaches the 99.99th percentile.
    static let maximumNines = 4.0
    /// Most vertices per line (the CDF is sampled evenly in rank, and densely in the tail).
    static let maximumVertices = 600
    static let colors = ["inkwire-udp": "#1b6ac9", "inkwire-tcp": "#d1495b", "enet": "#2a9d4b",
                         "kcptun-fast3": "#e08a00", "kcptun-fast2": "#8e44ad", "kcptun-fast3-nofec": "#f2c14e", "kcptun-fast2-nofec": "#c39bd3"]

    /// A latency CDF for one loss level: x is latency (log scale), y the fraction delivered
    /// within it, drawn in "nines" (-log10(1 - F)) so the tail that matters is readable.
    static func cdfSVG(lossPercent: Double, rttMilliseconds: Int, _ results: [LossRunResult]) -> String {
        let plotted = results.filter { !$0.latencies.isEmpty }
        let lowest = max(1.0, plotted.map { Double($0.latencies[0]) / 1000 }.min() ?? 1)
        let highest = max(lowest * 10, plotted.map { Double($0.latencies[$0.latencies.count - 1]) / 1000 }.max() ?? 100)
        let decadeLow = floor10(lowest), decadeHigh = ceil125(highest)
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        func x(_ ms: Double) -> Double {
            left + (log10(max(ms, decadeLow)) - log10(decadeLow)) / (log10(decadeHigh) - log10(decadeLow)) * plotWidth
        }
        func y(_ fraction: Double) -> Double {
            let nines = fraction >= 1 ? maximumNines : min(maximumNines, -log10(1 - fraction))
            return top + plotHeight - nines / maximumNines * plotHeight
        }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="22" font-size="15" font-weight="bold">Command latency at \(lossPercent == lossPercent.rounded() ? "\(Int(lossPercent))" : number(lossPercent, places: 2)) % loss, \(rttMilliseconds) ms RTT</text>

            """
        // Grid: latency decades (1, 2, 5 steps) and percentiles.
        var tick = decadeLow
        while tick <= decadeHigh * 1.0001 {
            for step in [1.0, 2.0, 5.0] where tick * step <= decadeHigh * 1.0001 {
                let px = x(tick * step)
                svg += "<line x1=\"\(f(px))\" y1=\"\(f(top))\" x2=\"\(f(px))\" y2=\"\(f(top + plotHeight))\" stroke=\"#ddd\"/>\n"
                svg += "<text x=\"\(f(px))\" y=\"\(f(top + plotHeight + 16))\" text-anchor=\"middle\">\(number(tick * step, places: tick * step < 1 ? 1 : 0))</text>\n"
            }
            tick *= 10
        }
        svg += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 12))\" text-anchor=\"middle\">latency, ms (log scale): made at the drawer to delivered at a watcher</text>\n"
        for (fraction, label) in [(0.0, "0 %"), (0.5, "50 %"), (0.9, "90 %"), (0.99, "99 %"), (0.999, "99.9 %"), (0.9999, "99.99 %")] {
            let py = y(fraction)
            svg += "<line x1=\"\(f(left))\" y1=\"\(f(py))\" x2=\"\(f(left + plotWidth))\" y2=\"\(f(py))\" stroke=\"#ddd\"/>\n"
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(py + 4))\" text-anchor=\"end\">\(label)</text>\n"
        }
        svg += "<rect x=\"\(f(left))\" y=\"\(f(top))\" width=\"\(f(plotWidth))\" height=\"\(f(plotHeight))\" fill=\"none\" stroke=\"#444\"/>\n"
        for (index, result) in plotted.enumerated() {
            let color = colors[result.transport] ?? "#555"
            let n = result.latencies.count
            var points: [String] = []
            for rank in sampleRanks(n) {
                let ms = Double(result.latencies[rank]) / 1000
                // Steps: the fraction reaches (rank + 1) / n at this latency.
                points.append("\(f(x(ms))),\(f(y(Double(rank) / Double(n))))")
                points.append("\(f(x(ms))),\(f(y(Double(rank + 1) / Double(n))))")
            }
            svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>\n"
            let ly = top + 16 + Double(index) * 36
            svg += "<line x1=\"\(f(width - right + 14))\" y1=\"\(f(ly))\" x2=\"\(f(width - right + 38))\" y2=\"\(f(ly))\" stroke=\"\(color)\" stroke-width=\"3\"/>\n"
            svg += "<text x=\"\(f(width - right + 44))\" y=\"\(f(ly + 4))\">\(result.transport)</text>\n"
            svg += "<text x=\"\(f(width - right + 44))\" y=\"\(f(ly + 19))\" font-size=\"10\" fill=\"#555\">p99 \(number(result.percentileMs(0.99))) ms, \(number(result.completeness * 100, places: 1)) %</text>\n"
        }
        for (index, result) in results.filter({ $0.latencies.isEmpty }).enumerated() {
            let ly = top + 16 + Double(plotted.count + index) * 36
            svg += "<text x=\"\(f(width - right + 14))\" y=\"\(f(ly + 4))\" fill=\"#555\">\(result.transport): no samples</text>\n"
        }
        return svg + "</svg>\n"
    }

    /// Ranks to draw: evenly spread, plus every rank of the last 1 % (the tail), within bounds.
    static func sampleRanks(_ n: Int) -> [Int] {
        guard n > maximumVertices else { return Array(0..<n) }
        let tailStart = max(0, n - maximumVertices / 2)
        let stride = max(1, tailStart / (maximumVertices / 2))
        var ranks = Array(Swift.stride(from: 0, to: tailStart, by: stride))
        let tailStride = max(1, (n - tailStart) / (maximumVertices / 2))
        ranks += Array(Swift.stride(from: tailStart, to: n, by: tailStride))
        if ranks.last != n - 1 { ranks.append(n - 1) }
        return ranks
    }

    private static func f(_ value: Double) -> String { number(value, places: 1) }

    private static func floor10(_ value: Double) -> Double {
        var decade = 1.0
        while decade * 10 <= value { decade *= 10 }
        while decade > value { decade /= 10 }
        return decade
    }

    /// The smallest 1, 2 or 5 times a power of ten at or above `value`.
    private static func ceil125(_ value: Double) -> Double {
        var decade = 1.0
        while decade * 10 < value { decade *= 10 }
        for step in [1.0, 2.0, 5.0, 10.0] where decade * step >= value { return decade * step }
        return decade * 10
    }

    private static func log10(_ value: Double) -> Double { Glibc.log10(value) }
}
