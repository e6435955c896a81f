// Compact integer identifiers of the stroke model. Distinct types so an author id can never be
// passed where a stroke id is meant; each is a plain UInt32 on the wire.

/// A room member who draws: assigned by the relay, stable for the member's life in the room.
public struct AuthorID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }
    public static func < (a: AuthorID, b: AuthorID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "a\(rawValue)" }
}

/// A stroke's number among its author's strokes. The author chooses it (no coordination needed);
/// `StrokeRef` (author + stroke) is unique in the room.
public struct StrokeID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }
    public static func < (a: StrokeID, b: StrokeID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "s\(rawValue)" }
}

/// A stroke named across the room: the target of `Command.erase`.
public struct StrokeRef: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var author: AuthorID
    public var stroke: StrokeID
    public init(author: AuthorID, stroke: StrokeID) {
        self.author = author
        self.stroke = stroke
    }
    public static func < (a: StrokeRef, b: StrokeRef) -> Bool {
        (a.author.rawValue, a.stroke.rawValue) < (b.author.rawValue, b.stroke.rawValue)
    }
    public var description: String { "\(author)/\(stroke)" }
}

/// A page of the board. Page 0 exists from the start; others are created by `Command.addPage`.
public struct PageID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }
    public static func < (a: PageID, b: PageID) -> Bool { a.rawValue < b.rawValue }
    /// The page every board starts with and every author starts on.
    public static let first = PageID(0)
    public var description: String { "p\(rawValue)" }
}
