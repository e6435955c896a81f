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
    /// With `thinned: false` every point of the stroke is kept (see `ownLinesMatched`).
    public static func expected(from board: Board, page: PageID, thinned: Bool = true) -> [AuthorID: LegacyAppScreen] {
        var out: [AuthorID: LegacyAppScreen] = [:]
        for stroke in board.visibleStrokes(on: page) where !stroke.points.isEmpty {
            var points = [Point(x: stroke.points[0].x, y: stroke.points[0].y)]
            var last = (Double(stroke.points[0].x) / 1e6, Double(stroke.points[0].y) / 1e6)
            for (i, p) in stroke.points.enumerated().dropFirst() {
                let x = Double(p.x) / 1e6, y = Double(p.y) / 1e6
                if !thinned || abs(x - last.0) > HYWhiteboardScreen.difMin || abs(y - last.1) > HYWhiteboardScreen.difMin || i == stroke.points.count - 1 {
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

    /// This screen with each of its author's own lines that the app thinned differently put back
    /// as the board's thinning (`own`: the author's lines thinned, `ownPoints`: with every point),
    /// and how many were. The app thins its own line against one last point shared with the lines
    /// it receives: a received line read while its user draws (our bytes were in flight when the
    /// user started the stroke) changes which points within `difMin` of the one before it the app
    /// keeps. Such a line is the board's line when it has the stroke's pen, first and last point
    /// and only the stroke's points, in order (every device is within `difMin` of it).
    public func ownLinesMatched(own: LegacyAppScreen, ownPoints: LegacyAppScreen) -> (screen: LegacyAppScreen, rethinned: Int) {
        guard own.lines.count == ownPoints.lines.count else { return (self, 0) }
        var out = self
        var rethinned = 0
        let exact = Set(own.lines.map(\.points))
        for (i, line) in lines.enumerated() where !exact.contains(line.points) {
            for (k, full) in ownPoints.lines.enumerated()
            where full.color == line.color && full.width == line.width && full.eraser == line.eraser && line.isThinning(of: full) {
                out.lines[i] = own.lines[k]
                rethinned += 1
                break
            }
        }
        return (out, rethinned)
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
    /// Same first and last point, and only points of `full`, in its order.
    func isThinning(of full: LegacyAppScreen.Line) -> Bool {
        guard let first = points.first, first == full.points.first, points.last == full.points.last else { return false }
        var k = 0
        for p in points {
            while k < full.points.count && full.points[k] != p { k += 1 }
            guard k < full.points.count else { return false }
            k += 1
        }
        return true
    }

    var summary: String {
        let head = points.prefix(2).map { "(\($0.x),\($0.y))" }.joined()
        return "pen(\(color),\(width))\(eraser ? " eraser" : "") \(points.count) points \(head)"
    }
}
