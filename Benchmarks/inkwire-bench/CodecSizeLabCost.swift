// codec-size-lab: charging coded points with cross-validated static tables, and fitting
// linear predictors on the training half only.
import Foundation


/// One coordinate pair as a variant codes it: a prediction (fixed, or a linear function of
/// features fitted by least squares per class), the residual table pair it is charged in, and
/// whether its signs are modelled (a stroke's first points, as the codec's S tables) or raw.
struct LabItem {
    /// 0 or 1: which half of the strokes this point belongs to (strokes alternate).
    var fold: Int
    var targetX: Int64
    var targetY: Int64
    var baseX: Int64
    var baseY: Int64
    /// Least-squares class, or nil when the prediction is `base` itself.
    var fitClass: Int?
    /// Used when `fitClass` has too few training samples.
    var fallbackClass: Int?
    var featuresX: [Int64] = []
    var featuresY: [Int64] = []
    /// Residual tables 2 * table (x) and 2 * table + 1 (y).
    var table: Int
    /// Base of the codec's sign tables (x: signTables, y: signTables + 1 + j), or nil for raw signs.
    var signTables: Int?
    /// Further symbols this point costs (a choice between predictions), as (table, alphabet, symbol).
    var extra: [(table: Int, alphabet: Int, symbol: Int)] = []
    /// y's residual table also chosen by x's magnitude class (`LabItem.yClass`).
    var yByX = false

    /// Buckets of x's magnitude symbol (bit lengths 0-8, 9-12, 13-14, 15, 16, 17 and more).
    static func yClass(_ xSymbol: Int) -> Int {
        let k = xSymbol < 4 ? 0 : xSymbol / 4 + 2
        return k <= 8 ? 1 : (k <= 12 ? 2 : (k <= 14 ? 3 : min(k - 11, 6)))
    }
}

/// Total bits of a variant's items: each half charged with tables (and predictor coefficients)
/// counted on the other half, so no figure is a plug-in entropy of its own sample.
func crossValidatedBits(_ items: [LabItem]) -> (total: Double, byPart: [LabPart: Double], points: [LabPart: Int]) {
    var bits = 0.0
    var byPart: [LabPart: Double] = [:]
    var points: [LabPart: Int] = [:]
    for train in 0..<2 {
        let fits = LabFits(items, fold: train)
        var tables = LabTables()
        var charged: [(part: LabPart, events: (symbols: [(Int, Int, Int)], rawBits: Int))] = []
        for item in items {
            let events = fits.events(item)
            if item.fold == train {
                for e in events.symbols { tables.count(e.0, alphabet: e.1, symbol: e.2) }
            } else {
                charged.append((LabPart(table: item.table), events))
            }
        }
        for (part, events) in charged {
            let b = Double(events.rawBits) + events.symbols.reduce(0.0) { $0 + tables.bits($1.0, alphabet: $1.1, symbol: $1.2) }
            bits += b
            byPart[part, default: 0] += b
            points[part, default: 0] += 1
        }
    }
    return (bits, byPart, points)
}

/// Where a point's bits go, from its residual table.
enum LabPart: String, CaseIterable {
    case start, second, third, main
    case extrapolated = "ahead", interpolated = "between"

    /// Table ids: 0 start, 1-9 the codec's (n, c), 20-25 ahead, 30-42 between, this one the
    /// start after a character's pause.
    static let pausedStartTable = 60

    init(table: Int) {
        switch table {
        case 0, LabPart.pausedStartTable: self = .start
        case 1...3: self = .second
        case 4...6: self = .third
        case 7...9: self = .main
        case 20..<30: self = .extrapolated
        default: self = .interpolated
        }
    }
}

/// Symbol counts per table, quantized as the codec's frozen tables are (protocol.md 2.3).
struct LabTables {
    static let precision = 4096.0
    /// The codec's prior for sign tables (20 per symbol); none for residuals.
    static let signPrior = 20.0
    static let signTableBase = 10_000
    private var counts: [Int: [Double]] = [:]
    private var frozen: [Int: [Double]] = [:]

    mutating func count(_ table: Int, alphabet: Int, symbol: Int) {
        counts[table, default: [Double](repeating: 0, count: alphabet)][symbol] += 1
        frozen[table] = nil
    }

    mutating func bits(_ table: Int, alphabet: Int, symbol: Int) -> Double {
        if frozen[table] == nil {
            let prior = table >= LabTables.signTableBase ? LabTables.signPrior : 0
            frozen[table] = LabTables.quantize((counts[table] ?? [Double](repeating: 0, count: alphabet)).map { $0 + prior })
        }
        return -log2(frozen[table]![symbol] / LabTables.precision)
    }

    /// f_i = 1 + floor(c_i (M - A) / C), the remainder to the largest fractional parts.
    static func quantize(_ c: [Double]) -> [Double] {
        let a = Double(c.count)
        let total = c.reduce(0, +)
        if total == 0 { return [Double](repeating: precision / a, count: c.count) }
        let exact = c.map { $0 * (precision - a) / total }
        var f = exact.map { 1 + $0.rounded(.down) }
        var left = Int(precision - f.reduce(0, +))
        let order = exact.indices.sorted { (exact[$0] - exact[$0].rounded(.down), $1) > (exact[$1] - exact[$1].rounded(.down), $0) }
        var k = 0
        while left > 0 { f[order[k % order.count]] += 1; left -= 1; k += 1 }
        return f
    }
}

/// Least-squares coefficients per class, fitted on one fold (both axes pooled).
struct LabFits {
    static let minSamples = 40
    private var coefficients: [Int: [Double]] = [:]

    init(_ items: [LabItem], fold: Int) {
        var normal: [Int: (a: [[Double]], b: [Double], n: Int)] = [:]
        for item in items where item.fold == fold {
            for cls in [item.fitClass, item.fallbackClass].compactMap({ $0 }) {
                let d = item.featuresX.count
                var e = normal[cls] ?? ([[Double]](repeating: [Double](repeating: 0, count: d), count: d), [Double](repeating: 0, count: d), 0)
                for (f, t) in [(item.featuresX, item.targetX - item.baseX), (item.featuresY, item.targetY - item.baseY)] {
                    for i in 0..<d {
                        e.b[i] += Double(f[i]) * Double(t)
                        for j in 0..<d { e.a[i][j] += Double(f[i]) * Double(f[j]) }
                    }
                }
                e.n += 1
                normal[cls] = e
            }
        }
        for (cls, e) in normal where e.n >= LabFits.minSamples {
            coefficients[cls] = solve(e.a, e.b)
        }
    }

    func coefficients(_ cls: Int) -> [Double] { coefficients[cls] ?? [] }

    func prediction(_ item: LabItem) -> (Int64, Int64) {
        guard let cls = item.fitClass else { return (item.baseX, item.baseY) }
        let c = coefficients[cls] ?? item.fallbackClass.flatMap { coefficients[$0] }
            ?? [Double](repeating: 0, count: item.featuresX.count)
        func apply(_ f: [Int64]) -> Int64 { Int64(zip(c, f).reduce(0.0) { $0 + $1.0 * Double($1.1) }.rounded()) }
        return (item.baseX + apply(item.featuresX), item.baseY + apply(item.featuresY))
    }

    /// The symbols (table, alphabet, symbol) and raw bits an item costs, coded as protocol.md 2.1.
    func events(_ item: LabItem) -> (symbols: [(Int, Int, Int)], rawBits: Int) {
        let (px, py) = prediction(item)
        let rx = item.targetX - px
        let ry = item.targetY - py
        let sx = BinaryLabResidual.symbol(rx)
        let sy = BinaryLabResidual.symbol(ry)
        var symbols: [(Int, Int, Int)] = [(2 * item.table, 124, sx.symbol), (2 * item.table + 1 + (item.yByX ? 1000 * LabItem.yClass(sx.symbol) : 0), 124, sy.symbol)]
        var raw = sx.extraBits + sy.extraBits
        if let s = item.signTables {
            let base = LabTables.signTableBase + s
            if rx != 0 { symbols.append((base, 2, rx < 0 ? 1 : 0)); raw -= 1 }
            if ry != 0 { symbols.append((base + 1 + (rx == 0 ? 0 : (rx > 0 ? 1 : 2)), 2, ry < 0 ? 1 : 0)); raw -= 1 }
        }
        for e in item.extra { symbols.append((e.table, e.alphabet, e.symbol)) }
        return (symbols, raw)
    }
}

/// The codec's magnitude classes (protocol.md 2.1): |r| < 4 as itself, else 4 (k - 2) plus the two
/// bits below the leading one; extra bits = mantissa (k - 3) plus one sign bit when r != 0.
enum BinaryLabResidual {
    static func symbol(_ r: Int64) -> (symbol: Int, extraBits: Int) {
        let a = r.magnitude
        if a < 4 { return (Int(a), a == 0 ? 0 : 1) }
        let k = 64 - a.leadingZeroBitCount
        return (4 * (k - 2) + Int((a >> UInt64(k - 3)) & 3), k - 2)
    }
}

/// Gaussian elimination with partial pivoting; a singular system gives zero coefficients.
private func solve(_ a0: [[Double]], _ b0: [Double]) -> [Double] {
    var a = a0
    var b = b0
    let n = b.count
    for col in 0..<n {
        guard let pivot = (col..<n).max(by: { abs(a[$0][col]) < abs(a[$1][col]) }), abs(a[pivot][col]) > 1e-9 else {
            return [Double](repeating: 0, count: n)
        }
        a.swapAt(col, pivot)
        b.swapAt(col, pivot)
        for row in 0..<n where row != col {
            let f = a[row][col] / a[col][col]
            for k in col..<n { a[row][k] -= f * a[col][k] }
            b[row] -= f * b[col]
        }
    }
    return (0..<n).map { b[$0] / a[$0][$0] }
}
