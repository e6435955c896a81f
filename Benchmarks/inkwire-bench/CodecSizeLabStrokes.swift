// codec-size-lab: the trace's points as the codec's stroke context sees them.
import InkCodec

struct LabPoint {
    var x: Int64
    var y: Int64
    /// The 60 Hz frame of the point's time.
    var frame: Int64
    /// Index of the live batch that carries it.
    var batch: Int
    /// The codec's time class (protocol.md 2.1): 0 one frame after the previous command, 1 two, else 2.
    var timeClass: Int
    /// Frames since the author's previous command.
    var gapFrames: Int64
}

/// One history of the codec's stroke context (protocol.md 2.4): a point that does not continue
/// the context's stroke starts one.
struct LabStroke {
    var points: [LabPoint] = []
    /// The codec's prediction of the first point: where the previous history started (0 at first).
    var anchorX: Int64
    var anchorY: Int64
    /// Where the previous history ended (0 at first).
    var previousEndX: Int64
    var previousEndY: Int64
    /// Where the last history that began after a pause of at least `characterPauseFrames` started.
    var characterX: Int64
    var characterY: Int64
    /// Strokes alternate between the two cross-validation halves.
    var fold: Int
}

enum LabStrokes {
    /// Walks the batches in order as one author's stroke context does.
    static func of(_ batches: [Batch]) -> [LabStroke] {
        var strokes: [LabStroke] = []
        var previousTime: UInt64 = 0
        var count = 0
        var stroke = StrokeID(0)
        var character: (Int64, Int64) = (0, 0)
        for (b, batch) in batches.enumerated() {
            for timed in batch.commands {
                defer { previousTime = timed.timeMs }
                guard case .point(let p) = timed.command else { continue }
                let d = frame(timed.timeMs) - frame(previousTime)
                let point = LabPoint(x: Int64(p.x), y: Int64(p.y), frame: frame(timed.timeMs), batch: b,
                                     timeClass: d == 1 ? 0 : (d == 2 ? 1 : 2), gapFrames: d)
                let continues = count > 0 && p.stroke == stroke && p.phase != .start
                if continues {
                    strokes[strokes.count - 1].points.append(point)
                    count = min(count + 1, 3)
                } else {
                    let last = strokes.last
                    if let last, last.points[0].gapFrames >= characterPauseFrames { character = (last.points[0].x, last.points[0].y) }
                    strokes.append(LabStroke(
                        points: [point], anchorX: last?.points[0].x ?? 0, anchorY: last?.points[0].y ?? 0,
                        previousEndX: last?.points.last!.x ?? 0, previousEndY: last?.points.last!.y ?? 0,
                        characterX: character.0, characterY: character.1,
                        fold: strokes.count % 2))
                    count = 1
                }
                stroke = p.stroke
            }
        }
        return strokes
    }

    /// The trace pauses 300-700 ms between characters, 80-250 ms between strokes.
    static let characterPauseFrames: Int64 = 17

    static func frame(_ t: UInt64) -> Int64 { Int64((t * 60 + 500) / 1000) }
}
