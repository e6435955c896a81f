/// A small Prometheus registry: counters, gauges and histograms, optionally labelled, rendered
/// in the text exposition format (version 0.0.4).
///
/// Output order is deterministic: families sorted by name, series by label values. Updating a
/// series is a field write on a cached cell (`counter.labels("udp").increment()`), so the hot
/// path does no lookups once the cell is kept. Metric and label names are program constants:
/// an invalid or conflicting one is a programming error and traps at registration.
/// Single-threaded, like the loop that updates and serves it.
public final class MetricsRegistry {
    /// Most label combinations one family keeps; updates to further combinations are counted
    /// in `droppedSeries` and not rendered, so a label fed from input cannot grow memory.
    public static let maximumSeriesPerFamily = 1_000

    private var families: [String: MetricFamily] = [:]
    /// Updates refused by `maximumSeriesPerFamily`.
    public private(set) var droppedSeries: UInt64 = 0

    public init() {}

    /// A monotonically increasing count. Names should end in `_total`.
    public func counter(_ name: String, help: String, labels: [String] = []) -> Counter {
        Counter(register(name, help: help, type: "counter", labels: labels, buckets: []))
    }

    /// A monotonically increasing total with a fraction (CPU seconds), following a total kept
    /// elsewhere. Names should end in `_total`.
    public func fractionalCounter(_ name: String, help: String) -> FractionalCounter {
        FractionalCounter(register(name, help: help, type: "counter", labels: [], buckets: [], fractional: true))
    }

    /// A value that goes up and down.
    public func gauge(_ name: String, help: String, labels: [String] = []) -> Gauge {
        Gauge(register(name, help: help, type: "gauge", labels: labels, buckets: []))
    }

    /// Observations counted into cumulative buckets (upper bounds, strictly increasing; `+Inf`
    /// is implicit), with their sum and count.
    public func histogram(_ name: String, help: String, buckets: [Double], labels: [String] = []) -> Histogram {
        precondition(!buckets.isEmpty && buckets.allSatisfy(\.isFinite), "histogram \(name): buckets must be finite")
        precondition(zip(buckets, buckets.dropFirst()).allSatisfy { $0 < $1 }, "histogram \(name): buckets must increase")
        precondition(!labels.contains("le"), "histogram \(name): 'le' is reserved")
        return Histogram(register(name, help: help, type: "histogram", labels: labels, buckets: buckets))
    }

    private func register(_ name: String, help: String, type: String, labels: [String], buckets: [Double],
                          fractional: Bool = false) -> MetricFamily {
        precondition(MetricsRegistry.isValidMetricName(name), "invalid metric name '\(name)'")
        for label in labels {
            precondition(MetricsRegistry.isValidLabelName(label), "metric \(name): invalid label name '\(label)'")
        }
        precondition(Set(labels).count == labels.count, "metric \(name): repeated label name")
        if let existing = families[name] {
            precondition(existing.type == type && existing.labelNames == labels && existing.buckets == buckets
                         && existing.fractional == fractional,
                         "metric \(name) registered twice with different shapes")
            return existing
        }
        let family = MetricFamily(registry: self, name: name, help: help, type: type, labelNames: labels, buckets: buckets,
                                  fractional: fractional)
        families[name] = family
        return family
    }

    fileprivate func noteDroppedSeries() { droppedSeries &+= 1 }

    /// The whole registry in the Prometheus text format.
    public func render() -> String {
        var out = ""
        for name in families.keys.sorted() {
            families[name]!.render(into: &out)
        }
        return out
    }

    /// The `Content-Type` of `render()`'s output.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func isValidMetricName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, isNameStart(first) || first == ":" else { return false }
        return name.unicodeScalars.allSatisfy { isNameStart($0) || $0 == ":" || ("0"..."9").contains($0) }
    }

    static func isValidLabelName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, isNameStart(first), !name.hasPrefix("__") else { return false }
        return name.unicodeScalars.allSatisfy { isNameStart($0) || ("0"..."9").contains($0) }
    }

    private static func isNameStart(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_"
    }
}

/// One series' state. Counters use `count`; gauges `value`; histograms all three.
public final class MetricCell {
    fileprivate var count: UInt64 = 0
    fileprivate var value: Double = 0
    fileprivate var bucketCounts: [UInt64]

    fileprivate init(buckets: Int) { bucketCounts = Array(repeating: 0, count: buckets) }
}

/// A series of a counter.
public struct CounterCell {
    let cell: MetricCell
    public func increment(by amount: UInt64 = 1) { cell.count &+= amount }
    /// Follows a total counted elsewhere (the store's commits): never goes back.
    public func advance(to total: UInt64) { cell.count = max(cell.count, total) }
    public var value: UInt64 { cell.count }
}

/// A series of a gauge.
public struct GaugeCell {
    let cell: MetricCell
    public func set(_ value: Double) { cell.value = value }
    public func set(_ value: Int) { cell.value = Double(value) }
    public func add(_ delta: Double) { cell.value += delta }
    public var value: Double { cell.value }
}

/// A series of a histogram.
public struct HistogramCell {
    let cell: MetricCell
    let bounds: [Double]
    public func observe(_ value: Double) {
        guard !value.isNaN else { return }
        if let index = bounds.firstIndex(where: { value <= $0 }) { cell.bucketCounts[index] &+= 1 }
        cell.count &+= 1
        cell.value += value
    }
    public var count: UInt64 { cell.count }
    public var sum: Double { cell.value }
}

public struct Counter {
    let family: MetricFamily
    init(_ family: MetricFamily) { self.family = family }
    /// The series for these label values (in the registered label order); keep it for hot paths.
    public func labels(_ values: String...) -> CounterCell { CounterCell(cell: family.cell(values)) }
    /// Increments the unlabelled series.
    public func increment(by amount: UInt64 = 1) { labels().increment(by: amount) }
    public func advance(to total: UInt64) { labels().advance(to: total) }
}

public struct FractionalCounter {
    let family: MetricFamily
    init(_ family: MetricFamily) { self.family = family }
    /// Follows a total counted elsewhere; never goes back.
    public func advance(to total: Double) {
        let cell = family.cell([])
        cell.value = max(cell.value, total)
    }
}

public struct Gauge {
    let family: MetricFamily
    init(_ family: MetricFamily) { self.family = family }
    public func labels(_ values: String...) -> GaugeCell { GaugeCell(cell: family.cell(values)) }
    public func set(_ value: Double) { labels().set(value) }
    public func set(_ value: Int) { labels().set(value) }
    public func add(_ delta: Double) { labels().add(delta) }
}

public struct Histogram {
    let family: MetricFamily
    init(_ family: MetricFamily) { self.family = family }
    public func labels(_ values: String...) -> HistogramCell {
        HistogramCell(cell: family.cell(values), bounds: family.buckets)
    }
    public func observe(_ value: Double) { labels().observe(value) }
}

/// One metric name: its metadata and its series.
final class MetricFamily {
    unowned let registry: MetricsRegistry
    let name: String
    let help: String
    let type: String
    let labelNames: [String]
    let buckets: [Double]
    /// A counter whose series keep a fraction (`value`, not `count`).
    let fractional: Bool
    private var series: [[String]: MetricCell] = [:]

    init(registry: MetricsRegistry, name: String, help: String, type: String, labelNames: [String], buckets: [Double],
         fractional: Bool) {
        self.registry = registry
        self.name = name
        self.help = help
        self.type = type
        self.labelNames = labelNames
        self.buckets = buckets
        self.fractional = fractional
        // An unlabelled metric exists (as zero) from the start, so it is always rendered.
        if labelNames.isEmpty { series[[]] = MetricCell(buckets: buckets.count) }
    }

    func cell(_ values: [String]) -> MetricCell {
        precondition(values.count == labelNames.count, "metric \(name): expected \(labelNames.count) label values")
        if let existing = series[values] { return existing }
        let cell = MetricCell(buckets: buckets.count)
        if series.count >= MetricsRegistry.maximumSeriesPerFamily {
            registry.noteDroppedSeries()
            return cell  // detached: updates go nowhere
        }
        series[values] = cell
        return cell
    }

    func render(into out: inout String) {
        out += "# HELP \(name) "
        for scalar in help.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\n# TYPE \(name) \(type)\n"
        let keys = series.keys.sorted { $0.lexicographicallyPrecedes($1) }
        for key in keys {
            let cell = series[key]!
            switch type {
            case "counter":
                line(&out, name, key, extra: nil, fractional ? MetricFamily.format(cell.value) : String(cell.count))
            case "gauge":
                line(&out, name, key, extra: nil, MetricFamily.format(cell.value))
            default:
                var cumulative: UInt64 = 0
                for (bound, count) in zip(buckets, cell.bucketCounts) {
                    cumulative &+= count
                    line(&out, name + "_bucket", key, extra: ("le", MetricFamily.format(bound)), String(cumulative))
                }
                line(&out, name + "_bucket", key, extra: ("le", "+Inf"), String(cell.count))
                line(&out, name + "_sum", key, extra: nil, MetricFamily.format(cell.value))
                line(&out, name + "_count", key, extra: nil, String(cell.count))
            }
        }
    }

    private func line(_ out: inout String, _ metric: String, _ values: [String], extra: (String, String)?, _ value: String) {
        out += metric
        if !values.isEmpty || extra != nil {
            out += "{"
            var first = true
            for (label, labelValue) in zip(labelNames, values) {
                if !first { out += "," }
                first = false
                out += label + "=\""
                MetricFamily.appendEscapedLabelValue(labelValue, to: &out)
                out += "\""
            }
            if let (label, labelValue) = extra {
                if !first { out += "," }
                out += "\(label)=\"\(labelValue)\""
            }
            out += "}"
        }
        out += " " + value + "\n"
    }

    static func appendEscapedLabelValue(_ value: String, to out: inout String) {
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
    }

    /// Sample values as Prometheus reads them: integers without a fraction, `+Inf`, `NaN`.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return value.description
    }
}
