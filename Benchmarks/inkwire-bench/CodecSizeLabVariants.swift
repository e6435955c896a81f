// codec-size-lab: the coding orders and predictors compared, each as a list of `LabItem`s.

/// How a stroke's first point is predicted.
enum LabStart: String, CaseIterable {
    /// The codec: where the previous history started (its anchor).
    case anchor
    /// Where the previous history ended.
    case previousEnd = "previous-end"
    /// The nearer of the two, named by a symbol (table of 2).
    case choice
    /// By the pause before it (the time is coded first): after a short pause the anchor plus a
    /// fitted multiple of (previous end - anchor) and a fitted offset; after a character's pause
    /// the last character's first start plus a fitted offset (the advance); own tables for each.
    case paused
}

/// How the points of a live batch that continue a stroke with 3 remembered points are ordered.
enum LabOrder: String, CaseIterable {
    /// One after the other, each extrapolated from the 3 before it (the codec's order).
    case sequential
    /// The batch's last point of the stroke first (extrapolated over its frame distance), then
    /// the points between interpolated between the known points before them and that last point.
    case lastFirst = "last-first"
    /// With 3 or more such points, the second one first (2-frame extrapolation), the first
    /// interpolated, the rest sequential; with 2 the last first.
    case secondFirst = "second-first"
}

struct LabVariant {
    var name: String
    /// The codec's own fixed predictors and tables (everything else is fitted per fold).
    var codecPredictors: Bool
    var order: LabOrder
    var start: LabStart
    /// A stroke's first three points: y's magnitude table chosen by x's magnitude class.
    var yByX = false
    /// The second point: the first plus a fitted drift per frame gap (not the first itself).
    var secondDrift = false

    func items(_ strokes: [LabStroke]) -> [LabItem] {
        var items: [LabItem] = []
        for stroke in strokes {
            items.append(startItem(stroke))
            let points = stroke.points
            var i = 1
            while i < points.count {
                var end = i
                while end < points.count && points[end].batch == points[i].batch { end += 1 }
                // Points i..<end share a batch: the first three of a stroke stay sequential.
                let tail = max(i, 3)
                for j in i..<min(tail, end) { items.append(sequentialItem(stroke, j)) }
                if end - tail >= 2 && order != .sequential {
                    let m = end - tail
                    let first = order == .secondFirst && m >= 3 ? tail + 1 : end - 1
                    items.append(extrapolatedItem(stroke, first, from: tail - 1))
                    for j in tail..<first { items.append(interpolatedItem(stroke, j, right: first)) }
                    for j in (first + 1)..<end { items.append(sequentialItem(stroke, j)) }
                } else if tail < end {
                    for j in tail..<end { items.append(sequentialItem(stroke, j)) }
                }
                i = end
            }
        }
        return items
    }

    private func startItem(_ s: LabStroke) -> LabItem {
        let p = s.points[0]
        var item = LabItem(fold: s.fold, targetX: p.x, targetY: p.y, baseX: s.anchorX, baseY: s.anchorY, table: 0, signTables: 0)
        item.yByX = yByX
        switch start {
        case .anchor: break
        case .previousEnd: (item.baseX, item.baseY) = (s.previousEndX, s.previousEndY)
        case .choice:
            let fromEnd = cost(p.x - s.previousEndX) + cost(p.y - s.previousEndY)
            let useEnd = fromEnd < cost(p.x - s.anchorX) + cost(p.y - s.anchorY)
            if useEnd { (item.baseX, item.baseY) = (s.previousEndX, s.previousEndY) }
            item.extra = [(table: 50_000, alphabet: 2, symbol: useEnd ? 1 : 0)]
        case .paused:
            if p.gapFrames >= LabStrokes.characterPauseFrames {
                (item.baseX, item.baseY) = (s.characterX, s.characterY)
                (item.featuresX, item.featuresY) = ([1, 0], [0, 1])
                (item.table, item.signTables, item.fitClass) = (LabPart.pausedStartTable, 12, key(7, 0, 0))
            } else {
                (item.featuresX, item.featuresY) = ([s.previousEndX - s.anchorX, 1, 0], [s.previousEndY - s.anchorY, 0, 1])
                item.fitClass = key(7, 1, 0)
            }
        }
        return item
    }

    /// Point j coded after every point before it (n = min(j, 3) remembered points).
    private func sequentialItem(_ s: LabStroke, _ j: Int) -> LabItem {
        let p = s.points
        let n = min(j, 3)
        let c = p[j].timeClass
        var item = LabItem(fold: s.fold, targetX: p[j].x, targetY: p[j].y, baseX: p[j - 1].x, baseY: p[j - 1].y,
                           table: 1 + (n - 1) * 3 + c, signTables: n < 3 ? 4 * n : nil)
        item.yByX = yByX && n < 3
        if n == 1 && secondDrift {
            (item.featuresX, item.featuresY) = ([1, 0], [0, 1])
            item.fitClass = key(8, Int(min(p[j].frame - p[j - 1].frame, 6)), 0)
        }
        guard n >= 2 else { return item }
        let vx = [p[j - 1].x - p[j - 2].x] + (n == 3 ? [p[j - 2].x - p[j - 3].x] : [])
        let vy = [p[j - 1].y - p[j - 2].y] + (n == 3 ? [p[j - 2].y - p[j - 3].y] : [])
        if codecPredictors {
            item.baseX = codecPrediction(vx, p[j - 1].x, c)
            item.baseY = codecPrediction(vy, p[j - 1].y, c)
        } else {
            let gaps = (0..<n).map { min(p[j - $0].frame - p[j - $0 - 1].frame, 4) }
            item.fitClass = key(1, n, gaps.reduce(0) { $0 * 8 + Int($1) })
            item.fallbackClass = key(2, n, c)
            (item.featuresX, item.featuresY) = (vx, vy)
        }
        return item
    }

    /// Point j extrapolated from the three points ending at `last` (j - last frames ahead).
    private func extrapolatedItem(_ s: LabStroke, _ j: Int, from last: Int) -> LabItem {
        let p = s.points
        let h = min(p[j].frame - p[last].frame, 8)
        let g = (min(p[last].frame - p[last - 1].frame, 4), min(p[last - 1].frame - p[last - 2].frame, 4))
        var item = LabItem(fold: s.fold, targetX: p[j].x, targetY: p[j].y, baseX: p[last].x, baseY: p[last].y,
                           table: 20 + Int(min(h, 5)), signTables: nil)
        item.fitClass = key(3, Int(h), Int(g.0 * 8 + g.1))
        item.fallbackClass = key(4, Int(h), 0)
        item.featuresX = [p[last].x - p[last - 1].x, p[last - 1].x - p[last - 2].x]
        item.featuresY = [p[last].y - p[last - 1].y, p[last - 1].y - p[last - 2].y]
        return item
    }

    /// Point j between the known point j - 1 (and the two before it) and the coded point `right`.
    private func interpolatedItem(_ s: LabStroke, _ j: Int, right r: Int) -> LabItem {
        let p = s.points
        let dl = min(p[j].frame - p[j - 1].frame, 3)
        let dr = min(p[r].frame - p[j].frame, 4)
        let g = min(p[j - 1].frame - p[j - 2].frame, 3)
        var item = LabItem(fold: s.fold, targetX: p[j].x, targetY: p[j].y, baseX: p[j - 1].x, baseY: p[j - 1].y,
                           table: 30 + Int(min(dl, 2) * 4 + dr), signTables: nil)
        item.fitClass = key(5, Int(dl * 8 + dr), Int(g))
        item.fallbackClass = key(6, Int(dl * 8 + dr), 0)
        item.featuresX = [p[j - 1].x - p[j - 2].x, p[j - 2].x - p[j - 3].x, p[r].x - p[j - 1].x]
        item.featuresY = [p[j - 1].y - p[j - 2].y, p[j - 2].y - p[j - 3].y, p[r].y - p[j - 1].y]
        return item
    }

    private func key(_ kind: Int, _ a: Int, _ b: Int) -> Int { kind * 1_000_000 + a * 1000 + b }

    /// protocol.md 2.1's predictors for 2 and 3 remembered points.
    private func codecPrediction(_ v: [Int64], _ p1: Int64, _ c: Int) -> Int64 {
        if v.count == 1 { return p1 + ((v[0] * (c == 0 ? 59 : 8) + 32) >> 6) }
        let (a, b): (Int64, Int64) = c == 0 ? (99, 45) : (c == 1 ? (11, 2) : (35, 11))
        return p1 + ((a * v[0] - b * v[1] + 32) >> 6)
    }

    /// Rough bits of a residual, to choose between predictions.
    private func cost(_ r: Int64) -> Int { 64 - r.magnitude.leadingZeroBitCount }
}
