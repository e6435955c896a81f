// What an app's whiteboard view shows, in a form tests compare.
import InkCodec

/// The visible lines of an app, in drawing order, each with the pen of its first point (the
/// app draws a line with that pen) and its stored points in millionths of the view.
public struct LegacyAppScreen: Hashable, Sendable, CustomStringConvertible {
    public struct Point: Hashable, Sendable {
        public var x: Int32
        public var y: Int32
    }

    public struct Line: Hashable, Sendable, Comparable {
        public var color: Int
        public var width: Int
        public var eraser: Bool
        public var points: [Point]

        public static func < (a: Line, b: Line) -> Bool {
            if a.color != b.color { return a.color < b.color }
            if a.width != b.width { return a.width < b.width }
            if a.eraser != b.eraser { return !a.eraser }
            if a.points.count != b.points.count { return a.points.count < b.points.count }
            for (p, q) in zip(a.points, b.points) where p != q { return p.x != q.x ? p.x < q.x : p.y < q.y }
            return false
        }
    }

    public var lines: [Line]

    public init(lines: [Line] = []) { self.lines = lines }

    /// The lines an app shows for the visible strokes of `page`, by author (each author's in
    /// drawing order): every stroke as a line with its pen, its points thinned by the app's
    /// filter (a point within 6/768 of the last one kept on both axes is dropped; the first and
    /// the last are always kept: the last is the end the app gets).
    public static func expected(from board: Board, page: PageID) -> [AuthorID: LegacyAppScreen] {
        var out: [AuthorID: LegacyAppScreen] = [:]
        for stroke in board.visibleStrokes(on: page) where !stroke.points.isEmpty {
            var points = [Point(x: stroke.points[0].x, y: stroke.points[0].y)]
            var last = (Double(stroke.points[0].x) / 1e6, Double(stroke.points[0].y) / 1e6)
            for (i, p) in stroke.points.enumerated().dropFirst() {
                let x = Double(p.x) / 1e6, y = Double(p.y) / 1e6
                if abs(x - last.0) > HYWhiteboardScreen.difMin || abs(y - last.1) > HYWhiteboardScreen.difMin || i == stroke.points.count - 1 {
                    points.append(Point(x: p.x, y: p.y))
                    last = (x, y)
                }
            }
            if stroke.points.count == 1 { points.append(points[0]) }
            let line = Line(color: Int(stroke.style.color), width: Int(stroke.style.width), eraser: stroke.tool == .eraser, points: points)
            out[stroke.ref.author, default: LegacyAppScreen()].lines.append(line)
        }
        return out
    }

    /// Whether this screen is exactly the lines of `parts`, each part's lines in its order
    /// (lines drawn at the same time by different authors stand in a different order on each
    /// author's app: each app puts its own line first).
    public func interleaves(_ parts: [LegacyAppScreen]) -> Bool {
        guard lines.sorted() == parts.flatMap(\.lines).sorted() else { return false }
        for part in parts {
            var next = 0
            for line in lines where next < part.lines.count && line == part.lines[next] { next += 1 }
            if next != part.lines.count { return false }
        }
        return true
    }

    /// Why `interleaves(parts)` fails, for failure messages.
    public func explain(_ parts: [LegacyAppScreen]) -> String {
        var wanted = parts.flatMap(\.lines)
        var extra: [Line] = []
        for line in lines {
            if let i = wanted.firstIndex(of: line) { wanted.remove(at: i) } else { extra.append(line) }
        }
        let missing = wanted.prefix(3).map(\.summary).joined(separator: "; ")
        let added = extra.prefix(3).map(\.summary).joined(separator: "; ")
        var order = ""
        for part in parts {
            // The first line of a part that the screen shows before the part's line above it.
            var next = 0
            for line in lines where next < part.lines.count && line == part.lines[next] { next += 1 }
            if next < part.lines.count, wanted.isEmpty, extra.isEmpty {
                let at = lines.firstIndex(of: part.lines[next]) ?? -1
                order = "; out of order: line \(next) of \(part.lines.count) of a part (\(part.lines[next].summary)) at \(at) of \(lines.count)"
                break
            }
        }
        return "\(wanted.count) lines missing [\(missing)], \(extra.count) not drawn by anyone [\(added)]\(order)"
    }

    /// The first difference from `other`, for failure messages.
    public func difference(from other: LegacyAppScreen) -> String? {
        if self == other { return nil }
        for (i, (a, b)) in zip(lines, other.lines).enumerated() where a != b {
            return "line \(i) differs: \(a.summary) vs \(b.summary)"
        }
        return "\(lines.count) lines vs \(other.lines.count)"
    }

    public var description: String { "\(lines.count) lines, \(lines.reduce(0) { $0 + $1.points.count }) points" }
}

extension LegacyAppScreen.Line {
    var summary: String {
        let head = points.prefix(2).map { "(\($0.x),\($0.y))" }.joined()
        return "pen(\(color),\(width))\(eraser ? " eraser" : "") \(points.count) points \(head)"
    }
}
