// codec-size-lab: how well a stroke's end and its points' frame gaps could be predicted from its
// speed (a minimum-jerk stroke slows down before it ends and before a sharp corner).
import Foundation

/// Each continuing point's (phase end or not, frames since the previous point, capped at 9),
/// charged with cross-validated tables, in bits: by the remembered count (as the codec's K[n]
/// and T tables see it), and by the remembered count, the last step's speed class and whether
/// it slowed down. Covers only the kind and time of points that continue a stroke.
struct LabPhase {
    var byCountBits = 0.0
    var bySpeedBits = 0.0

    init(_ strokes: [LabStroke]) {
        var events: [(fold: Int, plain: Int, speed: Int, symbol: Int)] = []
        for s in strokes {
            let p = s.points
            for j in 1..<max(p.count, 1) {
                let n = min(j, 3)
                let symbol = (j == p.count - 1 ? 10 : 0) + Int(min(p[j].frame - p[j - 1].frame, 9))
                var speed = 0
                if j >= 2 {
                    let step = hypot(Double(p[j - 1].x - p[j - 2].x) * 1.024e-3, Double(p[j - 1].y - p[j - 2].y) * 0.768e-3)
                        / Double(max(p[j - 1].frame - p[j - 2].frame, 1))
                    speed = 1 + min(Int(log2(max(step, 0.25)) + 2), 6)
                    if j >= 3 {
                        let before = hypot(Double(p[j - 2].x - p[j - 3].x) * 1.024e-3, Double(p[j - 2].y - p[j - 3].y) * 0.768e-3)
                            / Double(max(p[j - 2].frame - p[j - 3].frame, 1))
                        if step < 0.8 * before { speed += 8 }
                    }
                }
                events.append((s.fold, n, n * 100 + speed, symbol))
            }
        }
        for train in 0..<2 {
            var plain = LabTables()
            var bySpeed = LabTables()
            for e in events where e.fold == train {
                plain.count(e.plain, alphabet: 20, symbol: e.symbol)
                bySpeed.count(e.speed, alphabet: 20, symbol: e.symbol)
            }
            for e in events where e.fold != train {
                byCountBits += plain.bits(e.plain, alphabet: 20, symbol: e.symbol)
                bySpeedBits += bySpeed.bits(e.speed, alphabet: 20, symbol: e.symbol)
            }
        }
    }
}
