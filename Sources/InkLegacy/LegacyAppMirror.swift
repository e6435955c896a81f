// What the session knows of the app's whiteboard screen: its lines, pointers and undo stacks.
import InkCodec

/// The two users an app knows: itself and everyone else as one (`UserOfLinesMine`/`Other`).
public enum LegacyAppUser: Sendable, Hashable {
    case mine
    case other
}

/// One entry of the app's `allLines` (`HYWbLine`), at line level: which room stroke it shows,
/// its index and the user's previous last line. An undone line is replaced by a placeholder
/// (`[HYWbLine new]`: no points, index 0, previous 0) and kept on the user's cancel stack.
public struct LegacyAppLine: Sendable, Hashable {
    /// Which object this is (the app compares lines by identity when it takes one off a stack).
    public var id: UInt64
    /// `lineIndex`: where the line was created (0 for a placeholder).
    public var index: Int
    /// `lastLineIndex`: the user's last line when this one was created (-1: none).
    public var previous: Int
    /// The room stroke the line shows; nil for a placeholder.
    public var stroke: StrokeRef?
    /// Who drew it (the app does not record this; the session does, to know which lines its
    /// own undo reaches).
    public var owner: LegacyAppUser = .other
    /// The app appended points the room does not have (to a line of another stroke).
    public var altered = false

    public var isPlaceholder: Bool { stroke == nil }
}

/// The session's replica of `HYWhiteboardViewController`'s line state, updated with every
/// message the session writes (assumed applied when written) and every action the app reports,
/// in the order the session places them. It follows the app's code exactly, defects included:
/// undo replaces the line at the *line's own* index with a placeholder and moves the pointer to
/// the line's previous; a non-start point goes to the line at the user's pointer (0 when it has
/// none, a crash when it is out of range); clear empties lines and stacks but keeps pointers;
/// any local touch empties both users' cancel stacks.
public struct LegacyAppMirror: Sendable {
    public private(set) var lines: [LegacyAppLine] = []
    public private(set) var minePointer: Int?
    public private(set) var otherPointer: Int?
    public private(set) var mineCancelled: [LegacyAppLine] = []
    public private(set) var otherCancelled: [LegacyAppLine] = []
    /// The app's pen (`_lineColorIndex`, `_lineWidth`; eraser mode is colour 5): its own pick,
    /// or the last pen style it received.
    public var pen: PenStyle = .initial
    /// Strokes shown, and the index of the line that shows each.
    public private(set) var shown: [StrokeRef: Int] = [:]

    private var nextID: UInt64 = 1

    public init() {}

    private mutating func newID() -> UInt64 {
        defer { nextID &+= 1 }
        return nextID
    }

    /// A new placeholder object (`[HYWbLine new]`).
    private mutating func placeholder() -> LegacyAppLine {
        LegacyAppLine(id: newID(), index: 0, previous: 0, stroke: nil)
    }

    public func pointer(_ user: LegacyAppUser) -> Int? { user == .mine ? minePointer : otherPointer }

    /// The visible line at `index`, if any.
    public func line(at index: Int) -> LegacyAppLine? {
        guard index >= 0, index < lines.count, !lines[index].isPlaceholder else { return nil }
        return lines[index]
    }

    /// Lines with a stroke, in the app's drawing order.
    public var visibleLines: [LegacyAppLine] { lines.filter { !$0.isPlaceholder } }

    // MARK: points

    /// Where a point the app adds for `user` goes (`_addPoint`).
    public enum PointTarget: Sendable, Equatable {
        /// A new line at this index (a start point, or any point while the app has no line).
        case newLine(Int)
        /// Appended to the line at this index (which may show another stroke or be a placeholder).
        case appended(Int)
        /// The user's pointer names no line: the app crashes (`allLines[index]` out of range).
        case crash(index: Int)
    }

    /// A start point of `user` showing `stroke`.
    @discardableResult
    public mutating func start(_ user: LegacyAppUser, stroke: StrokeRef?) -> Int {
        let index = lines.count
        let line = LegacyAppLine(id: newID(), index: index, previous: pointer(user) ?? -1, stroke: stroke, owner: user)
        lines.append(line)
        setPointer(user, index)
        if let stroke { shown[stroke] = index }
        return index
    }

    /// A point of `user` that is not a start. `stroke` is what a new line would show.
    public mutating func point(_ user: LegacyAppUser, newStroke stroke: StrokeRef?) -> PointTarget {
        if lines.isEmpty { return .newLine(start(user, stroke: stroke)) }
        let index = pointer(user) ?? 0
        guard index >= 0, index < lines.count else { return .crash(index: index) }
        return .appended(index)
    }

    /// Marks the line at `index` as showing more than its stroke.
    public mutating func alter(_ index: Int) {
        guard index >= 0, index < lines.count, !lines[index].isPlaceholder else { return }
        lines[index].altered = true
    }

    // MARK: edits

    /// Undo for `user` (`_cancelLinesWithUserId`): the line hidden (as it was), or nil when the
    /// app does nothing (and sends nothing).
    public mutating func cancel(_ user: LegacyAppUser) -> LegacyAppLine? {
        guard let index = pointer(user), index > -1, index < lines.count else { return nil }
        let line = lines[index]
        if user == .mine { mineCancelled.append(line) } else { otherCancelled.append(line) }
        // The app replaces the line at the line's own index (0 for a placeholder).
        let target = line.index
        if target < lines.count {
            if let old = lines[target].stroke, shown[old] == target { shown[old] = nil }
            lines[target] = placeholder()
        }
        setPointer(user, line.previous)
        return line
    }

    /// Redo for `user` (`_resumeLineWithUserId`): the line put back, nil when the app does
    /// nothing, or `.crash` when the line's index is past the end (`setObject:atIndexedSubscript:`).
    public enum ResumeResult: Sendable, Equatable {
        case nothing
        case resumed(LegacyAppLine)
        case crash
    }

    public mutating func resume(_ user: LegacyAppUser) -> ResumeResult {
        var stack = user == .mine ? mineCancelled : otherCancelled
        guard let line = stack.last else { return .nothing }
        guard line.index <= lines.count else { return .crash }
        if line.index == lines.count { lines.append(line) } else {
            if let old = lines[line.index].stroke, shown[old] == line.index { shown[old] = nil }
            lines[line.index] = line
        }
        if let stroke = line.stroke { shown[stroke] = line.index }
        stack.removeAll { $0.id == line.id }
        if user == .mine { mineCancelled = stack } else { otherCancelled = stack }
        setPointer(user, line.index)
        return .resumed(line)
    }

    /// Clear (`_clearAllUserLinesWithUserId`): true when the app had lines (and acts).
    @discardableResult
    public mutating func clearAll() -> Bool {
        guard !lines.isEmpty else { return false }
        lines = []
        mineCancelled = []
        otherCancelled = []
        shown = [:]
        return true
    }

    /// A local touch the app accepted: it empties both cancel stacks (`_onPanGesture`).
    public mutating func touched() {
        mineCancelled = []
        otherCancelled = []
    }

    private mutating func setPointer(_ user: LegacyAppUser, _ value: Int) {
        if user == .mine { minePointer = value } else { otherPointer = value }
    }
}
