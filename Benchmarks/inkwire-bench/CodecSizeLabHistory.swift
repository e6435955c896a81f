// codec-size-lab: what a longer remembered history would buy a one-frame predictor.
import Foundation

/// Least-squares predictors of the next point from the last K points (K = 2...8), fitted on one
/// half of the strokes and measured on the other, over the same sample for every K: each point
/// whose 8 predecessors are each one 60 Hz frame apart. If the hand jitter were white on the
/// positions, older points would get weight (they average it out); weights near zero beyond the
/// last two steps mean the unpredictable part enters the motion itself.
struct LabHistory {
    static let longest = 8
    var samples = 0
    /// Per K: held-out robust sigma of the residual (millionths) and the coefficients on the
    /// K - 1 past steps, newest first, fitted on the even strokes.
    var rows: [(k: Int, sigma: Double, coefficients: [Double])] = []

    init(_ strokes: [LabStroke]) {
        var ends: [(stroke: Int, j: Int)] = []
        for (i, s) in strokes.enumerated() where s.points.count > LabHistory.longest {
            for j in LabHistory.longest..<s.points.count
            where (0..<LabHistory.longest).allSatisfy({ s.points[j - $0].frame - s.points[j - $0 - 1].frame == 1 }) {
                ends.append((i, j))
            }
        }
        samples = ends.count
        for k in 2...LabHistory.longest {
            let items = ends.map { e -> LabItem in
                let p = strokes[e.stroke].points
                var item = LabItem(fold: strokes[e.stroke].fold, targetX: p[e.j].x, targetY: p[e.j].y,
                                   baseX: p[e.j - 1].x, baseY: p[e.j - 1].y, table: 7, signTables: nil)
                item.fitClass = k
                item.featuresX = (1..<k).map { p[e.j - $0].x - p[e.j - $0 - 1].x }
                item.featuresY = (1..<k).map { p[e.j - $0].y - p[e.j - $0 - 1].y }
                return item
            }
            var residuals: [Double] = []
            for train in 0..<2 {
                let fits = LabFits(items, fold: train)
                for item in items where item.fold != train {
                    let (px, py) = fits.prediction(item)
                    residuals += [Double(item.targetX - px).magnitude, Double(item.targetY - py).magnitude]
                }
            }
            residuals.sort()
            rows.append((k, 1.4826 * residuals[residuals.count / 2], LabFits(items, fold: 0).coefficients(k)))
        }
    }
}
