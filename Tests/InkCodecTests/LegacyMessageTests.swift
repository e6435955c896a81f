import Testing
@testable import InkCodec

@Test(arguments: [
    ("1,0.266667,0.331675,1", LegacyMessage.point(tool: .pen, x: 266_667, y: 331_675, phase: .start)),
    ("2,-0.013333,1.020000,2", .point(tool: .eraser, x: -13_333, y: 1_020_000, phase: .move)),
    ("1,0.000000,-0.500000,3", .point(tool: .pen, x: 0, y: -500_000, phase: .end)),
    ("3,3,2", .penStyle(PenStyle(color: 3, width: 2)!)),
    ("3,5,3", .penStyle(PenStyle(color: 5, width: 3)!)),
    ("4", .undo), ("5", .redo), ("6", .clear),
])
func appMessagesReadAndPrintExactly(text: String, message: LegacyMessage) throws {
    #expect(try LegacyMessage(parsing: text) == message)
    #expect(message.text == text)
    #expect(message.bytes == Array(text.utf8))
}

@Test(arguments: [
    ("", LegacyTextError.empty),
    (String(repeating: "1", count: 65), .oversize(byteCount: 65)),
    ("1,0.5,0.5", .fieldCount(code: 1, found: 3, expected: 4)),
    ("2,0.5", .fieldCount(code: 2, found: 2, expected: 4)),
    ("1,0.5,0.5,1,1", .fieldCount(code: 1, found: 5, expected: 4)),
    ("3,1", .fieldCount(code: 3, found: 2, expected: 3)),
    ("4,", .fieldCount(code: 4, found: 2, expected: 1)),
    ("6,1", .fieldCount(code: 6, found: 2, expected: 1)),
    ("x", .notANumber(field: 0)),
    (",", .notANumber(field: 0)),
    (" 4", .notANumber(field: 0)),
    ("4 ", .notANumber(field: 0)),
    ("-4", .notANumber(field: 0)),
    ("1234567890", .notANumber(field: 0)),
    ("1,,0.5,1", .notANumber(field: 1)),
    ("1,0.5,abc,1", .notANumber(field: 2)),
    ("1,0.5,0.5,", .notANumber(field: 3)),
    ("1,0.5,0.5,1.0", .notANumber(field: 3)),
    ("1,0.5, 0.5,1", .notANumber(field: 2)),
    ("3,a,1", .notANumber(field: 1)),
    ("1,nan,0.5,1", .notFinite(field: 1)),
    ("1,0.5,-inf,2", .notFinite(field: 2)),
    ("2,INF,0.5,2", .notFinite(field: 1)),
    ("nan", .notFinite(field: 0)),
    ("1,0.1234567,0.5,1", .tooManyDecimals(field: 1)),
    ("1,0.5,0.5,0", .valueOutOfRange(field: 3, value: 0)),
    ("1,0.5,0.5,4", .valueOutOfRange(field: 3, value: 4)),
    ("1,0.5,0.5,999999999", .valueOutOfRange(field: 3, value: 999_999_999)),
    ("3,6,1", .valueOutOfRange(field: 1, value: 6)),
    ("3,0,0", .valueOutOfRange(field: 2, value: 0)),
    ("3,0,4", .valueOutOfRange(field: 2, value: 4)),
    ("3,0,300", .valueOutOfRange(field: 2, value: 300)),
    ("1,3000.000000,0.5,1", .coordinateOutOfRange(field: 1)),
    ("1,0.5,-2147.483649,1", .coordinateOutOfRange(field: 2)),
    ("0", .unknownCode(0)),
    ("7", .unknownCode(7)),
    ("101,640,480,1000", .unknownCode(101)),
])
func malformedMessagesGiveTypedErrors(text: String, error: LegacyTextError) {
    #expect(throws: error) { try LegacyMessage(parsing: text) }
}

@Test func nonASCIIAndControlBytesAreRejected() {
    for bytes: [UInt8] in [[0xff], [0x34, 0x00], [0x31, 0x2c, 0xc3, 0xa9, 0x2c, 0x30, 0x2c, 0x31], [0x0a]] {
        #expect(throws: LegacyTextError.self) { try LegacyMessage(parsing: bytes) }
    }
}

@Test func randomMessagesRoundTrip() throws {
    for seed in propertySeeds() {
        var rng = SeededRandom(seed: seed)
        for _ in 0..<5000 {
            let message = randomMessage(&rng)
            let parsed = try LegacyMessage(parsing: message.bytes)
            #expect(parsed == message, "seed \(seed): \(message.text)")
        }
    }
}

/// Random bytes (mostly from the message alphabet) never trap, and whatever parses prints back
/// to text that parses to the same message.
@Test func randomBytesNeverTrap() {
    let alphabet = Array("0123456789,.-1236naif".utf8)
    for seed in propertySeeds() {
        var rng = SeededRandom(seed: seed)
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...40, using: &rng)
            let bytes = (0..<count).map { _ in
                Int.random(in: 0..<10, using: &rng) == 0 ? UInt8.random(in: 0...255, using: &rng) : alphabet.randomElement(using: &rng)!
            }
            if let message = try? LegacyMessage(parsing: bytes) {
                #expect((try? LegacyMessage(parsing: message.bytes)) == message, "seed \(seed): \(hex(bytes))")
            }
        }
    }
}

@Test func transcriptionCoversExactlyTheLegacyKinds() {
    #expect(LegacyMessage(transcribing: .undo(StrokeID(3))) == .undo)
    #expect(LegacyMessage(transcribing: .penStyle(.initial)) == .penStyle(.initial))
    #expect(LegacyMessage(transcribing: .erase(StrokeRef(author: AuthorID(1), stroke: StrokeID(1)))) == nil)
    #expect(LegacyMessage(transcribing: .addPage(PageID(1))) == nil)
    #expect(LegacyMessage(transcribing: .switchPage(PageID(1))) == nil)
    #expect(LegacyMessage(transcribing: .room(.lock)) == nil)
    #expect(LegacyMessage(transcribing: .unknown(kind: CommandKind(rawValue: 99), payload: [])) == nil)
}
