// What an app's whiteboard view shows, in a form tests compare.

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
        return "\(wanted.count) lines missing [\(missing)], \(extra.count) not drawn by anyone [\(added)]"
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
