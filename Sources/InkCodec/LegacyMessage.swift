// One HYWhiteboard text command (the payload of a command-101 frame), read and written
// byte for byte as the app does: ASCII CSV, no spaces, no terminator.

/// A legacy text command. Codes: 1 draw point, 2 eraser point, 3 pen style, 4 undo, 5 redo,
/// 6 clear (docs/protocol.md section 3).
public enum LegacyMessage: Hashable, Sendable {
    /// `1,x,y,type` (pen) or `2,x,y,type` (eraser); x, y in millionths of the view.
    case point(tool: Tool, x: Int32, y: Int32, phase: StrokePhase)
    /// `3,color,width`
    case penStyle(PenStyle)
    /// `4`
    case undo
    /// `5`
    case redo
    /// `6`
    case clear

    /// Longest message accepted. The longest the app can print (`2,-2147.483648,...`) is 29.
    public static let maxBytes = 64

    /// The code that starts the message.
    public var code: Int {
        switch self {
        case .point(let tool, _, _, _): tool == .pen ? 1 : 2
        case .penStyle: 3
        case .undo: 4
        case .redo: 5
        case .clear: 6
        }
    }

    // MARK: reading

    /// Parses one message. Accepts exactly the app's format, plus coordinates with fewer than
    /// six decimals or none (read exactly); everything else is a typed error, never a trap.
    public init(parsing text: ArraySlice<UInt8>) throws(LegacyTextError) {
        guard text.count <= LegacyMessage.maxBytes else { throw .oversize(byteCount: text.count) }
        guard !text.isEmpty else { throw .empty }
        var fields: [ArraySlice<UInt8>] = []
        var start = text.startIndex
        for i in text.indices where text[i] == UInt8(ascii: ",") {
            fields.append(text[start..<i])
            start = i + 1
        }
        fields.append(text[start...])

        let code = try LegacyMessage.code(fields[0], field: 0)
        func expect(_ count: Int) throws(LegacyTextError) {
            guard fields.count == count else { throw .fieldCount(code: code, found: fields.count, expected: count) }
        }
        switch code {
        case 1, 2:
            try expect(4)
            let x = try LegacyMessage.coordinate(fields[1], field: 1)
            let y = try LegacyMessage.coordinate(fields[2], field: 2)
            let type = try LegacyMessage.code(fields[3], field: 3)
            guard let phase = StrokePhase(rawValue: UInt8(clamping: type)), type <= 3 else {
                throw .valueOutOfRange(field: 3, value: type)
            }
            self = .point(tool: code == 1 ? .pen : .eraser, x: x, y: y, phase: phase)
        case 3:
            try expect(3)
            let color = try LegacyMessage.code(fields[1], field: 1)
            let width = try LegacyMessage.code(fields[2], field: 2)
            guard color <= Int(PenStyle.colors.upperBound) else { throw .valueOutOfRange(field: 1, value: color) }
            guard let style = PenStyle(color: UInt8(color), width: UInt8(clamping: width)) else {
                throw .valueOutOfRange(field: 2, value: width)
            }
            self = .penStyle(style)
        case 4:
            try expect(1)
            self = .undo
        case 5:
            try expect(1)
            self = .redo
        case 6:
            try expect(1)
            self = .clear
        default:
            throw .unknownCode(code)
        }
    }

    public init(parsing text: [UInt8]) throws(LegacyTextError) {
        try self.init(parsing: text[...])
    }

    public init(parsing text: String) throws(LegacyTextError) {
        try self.init(parsing: Array(text.utf8)[...])
    }

    private static func code(_ field: ArraySlice<UInt8>, field index: Int) throws(LegacyTextError) -> Int {
        switch LegacyNumber.parseCode(field) {
        case .success(let value): return value
        case .failure(let failure): throw LegacyTextError(failure, field: index)
        }
    }

    private static func coordinate(_ field: ArraySlice<UInt8>, field index: Int) throws(LegacyTextError) -> Int32 {
        switch LegacyNumber.parseCoordinate(field) {
        case .success(let value): return value
        case .failure(let failure): throw LegacyTextError(failure, field: index)
        }
    }

    // MARK: writing

    /// Appends the message exactly as the app prints it.
    public func append(to out: inout [UInt8]) {
        LegacyNumber.appendDecimal(UInt32(code), to: &out)
        switch self {
        case .point(_, let x, let y, let phase):
            out.append(UInt8(ascii: ","))
            LegacyNumber.appendCoordinate(x, to: &out)
            out.append(UInt8(ascii: ","))
            LegacyNumber.appendCoordinate(y, to: &out)
            out.append(UInt8(ascii: ","))
            LegacyNumber.appendDecimal(UInt32(phase.rawValue), to: &out)
        case .penStyle(let style):
            out.append(UInt8(ascii: ","))
            LegacyNumber.appendDecimal(UInt32(style.color), to: &out)
            out.append(UInt8(ascii: ","))
            LegacyNumber.appendDecimal(UInt32(style.width), to: &out)
        case .undo, .redo, .clear:
            break
        }
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        append(to: &out)
        return out
    }

    public var text: String { String(decoding: bytes, as: UTF8.self) }
}

/// Why a legacy text message was rejected. Fields count from 0 (the code).
public enum LegacyTextError: Error, Hashable, Sendable, CustomStringConvertible {
    case empty
    /// Longer than `LegacyMessage.maxBytes`.
    case oversize(byteCount: Int)
    case fieldCount(code: Int, found: Int, expected: Int)
    /// Not a decimal number of the accepted form (or too many digits).
    case notANumber(field: Int)
    /// `nan` or `inf`, as `%f` prints non-finite values.
    case notFinite(field: Int)
    /// More than six decimals: not representable exactly.
    case tooManyDecimals(field: Int)
    /// An integer outside its field's range (type 1...3, colour 0...5, width 1...3).
    case valueOutOfRange(field: Int, value: Int)
    /// A coordinate beyond the Int32 range of millionths (about +-2147.48 views).
    case coordinateOutOfRange(field: Int)
    /// A code other than 1...6 (the app logs and ignores these).
    case unknownCode(Int)

    init(_ failure: LegacyNumber.ParseFailure, field: Int) {
        switch failure {
        case .notANumber: self = .notANumber(field: field)
        case .notFinite: self = .notFinite(field: field)
        case .tooManyDecimals: self = .tooManyDecimals(field: field)
        case .outOfRange: self = .coordinateOutOfRange(field: field)
        }
    }

    public var description: String {
        switch self {
        case .empty: "empty message"
        case .oversize(let n): "message of \(n) bytes exceeds \(LegacyMessage.maxBytes)"
        case .fieldCount(let code, let found, let expected): "code \(code) needs \(expected) fields, found \(found)"
        case .notANumber(let f): "field \(f) is not a number"
        case .notFinite(let f): "field \(f) is not finite"
        case .tooManyDecimals(let f): "field \(f) has more than \(LegacyNumber.decimals) decimals"
        case .valueOutOfRange(let f, let v): "field \(f) value \(v) is out of range"
        case .coordinateOutOfRange(let f): "field \(f) coordinate is out of range"
        case .unknownCode(let c): "unknown code \(c)"
        }
    }
}
