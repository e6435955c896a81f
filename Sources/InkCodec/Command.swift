// The stroke model: one board command. A board is an ordered log of these (see `Board`).

/// What draws a stroke. The legacy app sends pen points with code 1 and eraser points with code 2.
public enum Tool: UInt8, Hashable, Sendable, CaseIterable {
    case pen = 1
    case eraser = 2
}

/// Where a point lies in its stroke; raw values are the legacy `type` field.
public enum StrokePhase: UInt8, Hashable, Sendable, CaseIterable {
    case start = 1
    case move = 2
    case end = 3
}

/// One sampled point of a stroke.
///
/// Coordinates are exact integers of millionths of the drawing view (x of its width, y of its
/// height): the legacy app prints `%f` with six decimals, so this is lossless for it. They are
/// not clamped: a finger leaving the view gives values below 0 or above 1 (1_000_000).
public struct StrokePoint: Hashable, Sendable {
    /// Coordinate units per view width or height.
    public static let unitsPerView: Int32 = 1_000_000

    public var stroke: StrokeID
    public var tool: Tool
    public var phase: StrokePhase
    public var x: Int32
    public var y: Int32

    public init(stroke: StrokeID, tool: Tool = .pen, phase: StrokePhase, x: Int32, y: Int32) {
        self.stroke = stroke
        self.tool = tool
        self.phase = phase
        self.x = x
        self.y = y
    }
}

/// The pen an author draws with: state, applied to the author's following strokes.
public struct PenStyle: Hashable, Sendable, CustomStringConvertible {
    /// Colours 0...4 are pens, 5 is the eraser (as in the legacy app).
    public static let colors: ClosedRange<UInt8> = 0...5
    /// Width in percent of the view width (the eraser draws at double width).
    public static let widths: ClosedRange<UInt8> = 1...3
    /// The style both legacy ends assume at connect, and every author's style until it sends one.
    public static let initial = PenStyle(validColor: 0, width: 1)
    public static let eraserColor: UInt8 = 5

    public let color: UInt8
    public let width: UInt8

    /// Nil when `color` or `width` is out of range.
    public init?(color: UInt8, width: UInt8) {
        guard PenStyle.colors.contains(color), PenStyle.widths.contains(width) else { return nil }
        self.color = color
        self.width = width
    }

    private init(validColor: UInt8, width: UInt8) {
        self.color = validColor
        self.width = width
    }

    public var description: String { "pen(\(color),\(width))" }
}

/// Commands that concern the whole room rather than one author's drawing.
public enum RoomCommand: Hashable, Sendable {
    /// Only members the relay allows (e.g. the teacher) may draw while the board is locked.
    case lock
    case unlock
    /// Everyone's view follows this page (a teacher presenting).
    case presentPage(PageID)
}

/// The wire number of each command kind, shared by every codec. A decoder that meets a number
/// it does not know keeps the command as `Command.unknown` (skipped by `Board`, relayed as is).
public struct CommandKind: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static func < (a: CommandKind, b: CommandKind) -> Bool { a.rawValue < b.rawValue }

    public static let point = CommandKind(rawValue: 1)
    public static let penStyle = CommandKind(rawValue: 2)
    public static let undo = CommandKind(rawValue: 3)
    public static let redo = CommandKind(rawValue: 4)
    public static let clear = CommandKind(rawValue: 5)
    public static let erase = CommandKind(rawValue: 6)
    public static let addPage = CommandKind(rawValue: 7)
    public static let switchPage = CommandKind(rawValue: 8)
    public static let room = CommandKind(rawValue: 9)
    public static let background = CommandKind(rawValue: 10)

    /// Every kind this version understands, in wire order.
    public static let known: [CommandKind] = [.point, .penStyle, .undo, .redo, .clear, .erase, .addPage, .switchPage, .room, .background]
    public var isKnown: Bool { rawValue >= 1 && rawValue <= 10 }

    public var description: String { "kind\(rawValue)" }
}

/// One board command. Its author is the `Batch`'s; its time is the `TimedCommand`'s.
public enum Command: Hashable, Sendable {
    /// A point of the author's stroke `StrokePoint.stroke` (created by its first point).
    case point(StrokePoint)
    /// Sets the author's pen for the strokes it starts from now on.
    case penStyle(PenStyle)
    /// Hides one of the author's own strokes (the legacy app's undo names no target).
    case undo(StrokeID)
    /// Shows again one of the author's own undone strokes.
    case redo(StrokeID)
    /// Removes every stroke, of every author, from the author's current page.
    case clear
    /// Removes one stroke of any author (object eraser; the legacy app cannot express it).
    case erase(StrokeRef)
    /// Creates a page (no-op if it exists).
    case addPage(PageID)
    /// Moves the author to a page: where its following strokes and clears go.
    case switchPage(PageID)
    case room(RoomCommand)
    /// Sets or removes a page's background image (a blob named by its hash).
    case background(PageBackground)
    /// A command of a kind this version does not know (`kind` is never a known one), from a
    /// newer peer: kept opaque with its codec payload so a relay can forward it unchanged.
    case unknown(kind: CommandKind, payload: [UInt8])

    public var kind: CommandKind {
        switch self {
        case .point: .point
        case .penStyle: .penStyle
        case .undo: .undo
        case .redo: .redo
        case .clear: .clear
        case .erase: .erase
        case .addPage: .addPage
        case .switchPage: .switchPage
        case .room: .room
        case .background: .background
        case .unknown(let kind, _): kind
        }
    }
}
