// HYWhiteboard v1.2's whiteboard screen (`HYWhiteboardViewController`), written here from its
// source: its lines, per-user pointers and cancel stacks, its one pen, `_drawable`, and the
// point filter. Test fixture.

/// Who drew a line, as the app keys it (`UserOfLinesMine`, `UserOfLinesOther`).
public enum HYUser: Hashable, Sendable {
    case mine
    case other
}

/// Why the app stopped: its code would raise (`NSRangeException`) on this input.
public struct HYCrash: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}

/// `HYWbPoint`: a position as a fraction of the view, with the pen it was drawn with. `mx`/`my`
/// keep the millionths the app printed or parsed, for comparing screens.
struct HYPoint {
    var xScale: Double
    var yScale: Double
    var type: Int
    var colorIndex: Int
    var lineWidth: Int
    var isEraser: Bool
    var mx: Int32
    var my: Int32
}

/// `HYWbLine`: a class, as in the app (stacks and the lines array share objects).
final class HYLine {
    var colorIndex = 0
    var lineWidth = 0
    var lineIndex = 0
    var lastLineIndex = 0
    var points: [HYPoint] = []
}

/// The view controller's state and its handlers, one for one.
struct HYWhiteboardScreen {
    static let start = 1, move = 2, end = 3
    /// `_colorPanel.colorArr`: five colours and the eraser's clear colour.
    static let colorCount = 6
    /// `_difMin`: points closer than this to the last stored point (either axis) are not stored.
    static let difMin = 6.0 / 768.0

    var allLines: [HYLine] = []
    var lastLineIndex: [HYUser: Int] = [:]
    var cancelLines: [HYUser: [HYLine]] = [:]
    var lineColorIndex = 0
    /// `[_colorPanel.lineWidthArr.firstObject integerValue]`: 1.
    var lineWidth = 1
    var isEraser = false
    var drawable = true
    var lastPoint = (x: 0.0, y: 0.0)

    // MARK: received (`HYConversationDelegate`)

    /// `onReceivePoint:`: locks local drawing until an end point, draws with the app's pen.
    mutating func receivePoint(x: Double, y: Double, mx: Int32, my: Int32, type: Int, eraser: Bool) throws(HYCrash) {
        drawable = type == HYWhiteboardScreen.end
        let point = HYPoint(xScale: x, yScale: y, type: type, colorIndex: lineColorIndex, lineWidth: lineWidth,
                            isEraser: eraser, mx: mx, my: my)
        try addPoint(point, user: .other)
    }

    /// `onReceivePenColor:lineWidth:`: the received pen is the app's own from now on.
    mutating func receivePen(color: Int, width: Int) {
        lineWidth = width
        lineColorIndex = color
        isEraser = color == 5
    }

    // MARK: local (gestures and buttons)

    /// `_onPanGesture:` then `_onPointCollected:type:`: nil when the touch was ignored (a
    /// received line is open), else the point as it is sent (its type may have become a start).
    mutating func touch(mx: Int32, my: Int32, type: Int) throws(HYCrash) -> HYPoint? {
        guard drawable else { return nil }
        cancelLines.removeAll()  // drawing ends the chance to redo
        var point = HYPoint(xScale: Double(mx) / 1_000_000, yScale: Double(my) / 1_000_000, type: type,
                            colorIndex: lineColorIndex, lineWidth: lineWidth, isEraser: isEraser, mx: mx, my: my)
        point = try addPoint(point, user: .mine)
        return point
    }

    /// A colour, eraser or width button: the pen picked (the app sends `3,colour,width`).
    mutating func pickPen(color: Int, width: Int) {
        lineColorIndex = color
        lineWidth = width
        isEraser = color == 5
    }

    // MARK: lines

    /// `_addPoint:userId:`; returns the point as stored (its type may have become a start).
    @discardableResult
    mutating func addPoint(_ input: HYPoint, user: HYUser) throws(HYCrash) -> HYPoint {
        var point = input
        if point.type == HYWhiteboardScreen.start || allLines.isEmpty {
            if point.type != HYWhiteboardScreen.start {
                // No line at all: the point becomes a start (and is sent as one).
                point.type = HYWhiteboardScreen.start
            }
            guard point.colorIndex >= 0, point.colorIndex < HYWhiteboardScreen.colorCount else {
                throw HYCrash(reason: "colour index \(point.colorIndex) out of the colour array")
            }
            let line = HYLine()
            line.colorIndex = point.colorIndex
            line.lineWidth = point.lineWidth
            line.lineIndex = allLines.count
            line.lastLineIndex = allLines.isEmpty && input.type != HYWhiteboardScreen.start ? -1 : (lastLineIndex[user] ?? -1)
            line.points.append(point)
            allLines.append(line)
            lastLineIndex[user] = line.lineIndex
            lastPoint = (point.xScale, point.yScale)
            return point
        }
        // Not a start: filtered against the one last point of both users.
        if abs(point.xScale - lastPoint.x) > HYWhiteboardScreen.difMin || abs(point.yScale - lastPoint.y) > HYWhiteboardScreen.difMin
            || point.type == HYWhiteboardScreen.end {
            let index = lastLineIndex[user] ?? 0  // [nil integerValue] is 0
            guard index >= 0, index < allLines.count else {
                throw HYCrash(reason: "line index \(index) out of \(allLines.count) lines")
            }
            allLines[index].points.append(point)
            lastPoint = (point.xScale, point.yScale)
        }
        return point
    }

    /// `_cancelLinesWithUserId:`: true when a line was undone (the app sends `4` for its own).
    mutating func cancel(_ user: HYUser) -> Bool {
        guard let index = lastLineIndex[user], index > -1, index < allLines.count else { return false }
        let line = allLines[index]
        cancelLines[user, default: []].append(line)
        // The empty model is put at the line's own index.
        allLines[line.lineIndex] = HYLine()
        lastLineIndex[user] = line.lastLineIndex
        return true
    }

    /// `_resumeLineWithUserId:`: true when a line was put back (the app sends `5` for its own).
    mutating func resume(_ user: HYUser) throws(HYCrash) -> Bool {
        guard var stack = cancelLines[user], let line = stack.last else { return false }
        if line.lineIndex == allLines.count {
            allLines.append(line)
        } else if line.lineIndex < allLines.count {
            allLines[line.lineIndex] = line
        } else {
            throw HYCrash(reason: "resumed line index \(line.lineIndex) past \(allLines.count) lines")
        }
        stack.removeAll { $0 === line }
        cancelLines[user] = stack
        lastLineIndex[user] = line.lineIndex
        return true
    }

    /// `_clearAllUserLinesWithUserId:`: true when there were lines (the app sends `6` for its own).
    mutating func clearAll() -> Bool {
        guard !allLines.isEmpty else { return false }
        allLines.removeAll()
        cancelLines.removeAll()
        return true
    }

    /// What the view draws: lines with points, each with its first point's pen (`_singleLine:`).
    var screen: LegacyAppScreen {
        LegacyAppScreen(lines: allLines.compactMap { line in
            guard let first = line.points.first else { return nil }
            return LegacyAppScreen.Line(color: first.colorIndex, width: first.lineWidth, eraser: first.isEraser,
                                        points: line.points.map { LegacyAppScreen.Point(x: $0.mx, y: $0.my) })
        })
    }
}
