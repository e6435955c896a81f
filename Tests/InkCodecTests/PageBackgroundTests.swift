import Testing
@testable import InkCodec

private let hashA = BlobHash(Array(0..<32))!
private let hashB = BlobHash(Array(repeating: 0xAB, count: 32))!
private let imageA = BackgroundImage(hash: hashA, width: 1600, height: 1200, fit: .contain)!
private let author = AuthorID(7)

/// The payload of kind 10: exact bytes, a round trip, and every malformed form refused.
@Test func backgroundPayloadIsExactAndStrict() {
    let set = PageBackground(page: PageID(300), image: imageA)
    #expect(set.payload == [0xAC, 0x02, 1] + Array(0..<32) + [0xC0, 0x0C, 0xB0, 0x09, 1])
    #expect(PageBackground(payload: set.payload) == set)
    let removed = PageBackground(page: PageID(2), image: nil)
    #expect(removed.payload == [2, 0])
    #expect(PageBackground(payload: removed.payload) == removed)

    var p = set.payload
    #expect(PageBackground(payload: p + [0]) == nil, "a byte after it")
    for n in 0..<p.count { #expect(PageBackground(payload: Array(p.prefix(n))) == nil, "cut at \(n)") }
    p[p.count - 1] = 9
    #expect(PageBackground(payload: p) == nil, "an unknown fit")
    #expect(PageBackground(payload: [0x80, 0x00, 0]) == nil, "a non-minimal page varint")
    #expect(PageBackground(payload: [1, 2]) == nil, "an unknown flag")
    #expect(PageBackground(payload: [1, 1] + Array(0..<32) + [0, 5, 1]) == nil, "width 0")
    #expect(BackgroundImage(hash: hashA, width: BackgroundImage.maxSidePixels + 1, height: 10) == nil)
    #expect(BlobHash(hex: hashA.hex) == hashA)
    #expect(BlobHash(hex: String(hashA.hex.dropLast())) == nil)
    #expect(BlobHash(hex: hashA.hex.uppercased()) == nil, "lowercase hex only")
}

/// The binary codec carries a background in its opaque form (kind 14, kind number 10): it
/// round-trips, and a malformed background payload is a typed error, never a trap.
@Test func backgroundsRoundTripThroughTheBinaryCodec() throws {
    let batch = Batch(author: author, commands: [
        TimedCommand(timeMs: 0, command: .addPage(PageID(1))),
        TimedCommand(timeMs: 5, command: .background(PageBackground(page: PageID(1), image: imageA))),
        TimedCommand(timeMs: 9, command: .background(PageBackground(page: .first, image: nil))),
    ])
    var sender = BinaryCodecState()
    var receiver = BinaryCodecState()
    let bytes = try BinaryBatchCodec.encode(batch, state: &sender, selfContained: true)
    #expect(try BinaryBatchCodec.decode(bytes, state: &receiver) == batch)

    // The same bytes as an unknown kind 10 with a bad payload are refused.
    let bad = Batch(author: author, commands: [TimedCommand(timeMs: 0, command: .unknown(kind: CommandKind(rawValue: 10), payload: [1, 9]))])
    var s2 = BinaryCodecState()
    var r2 = BinaryCodecState()
    let badBytes = try BinaryBatchCodec.encode(bad, state: &s2, selfContained: true)
    #expect(throws: BinaryCodecError.self) { try BinaryBatchCodec.decode(badBytes, state: &r2) }
}

/// The fold: a background is set on an existing page only, replaced, removed; boards without
/// backgrounds keep their digests; the snapshot carries backgrounds.
@Test func boardFoldsBackgroundsAndSnapshotsThem() {
    var board = Board()
    let empty = board.digest
    #expect(empty == 0xe2595c4492365745)
    board.apply(.background(PageBackground(page: PageID(4), image: imageA)), author: author)
    #expect(board.backgrounds.isEmpty, "page 4 does not exist")
    #expect(board.digest == empty)

    board.apply(.addPage(PageID(4)), author: author)
    let withPage = board.digest
    board.apply(.background(PageBackground(page: PageID(4), image: imageA)), author: author)
    #expect(board.backgrounds == [PageID(4): imageA])
    let withA = board.digest
    #expect(withA != withPage)
    let imageB = BackgroundImage(hash: hashB, width: 1600, height: 1200, fit: .contain)!
    board.apply(.background(PageBackground(page: PageID(4), image: imageB)), author: author)
    #expect(board.digest != withA, "the hash is part of the digest")
    board.apply(.background(PageBackground(page: .first, image: imageA)), author: author)
    board.apply(.point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .start, x: 10, y: 10)), author: author)

    var folded = Board()
    for batch in board.snapshotBatches() { folded.apply(batch) }
    #expect(folded.digest == board.digest)
    #expect(folded.backgrounds == board.backgrounds)

    board.apply(.background(PageBackground(page: PageID(4), image: nil)), author: author)
    board.apply(.background(PageBackground(page: .first, image: nil)), author: author)
    #expect(board.backgrounds.isEmpty)
}

/// Fits place the image in the 4:3 view as the web page and the export draw it.
@Test func backgroundPlacement() {
    let tall = BackgroundImage(hash: hashA, width: 600, height: 1200, fit: .contain)!
    #expect(tall.placement(viewWidth: 1024, viewHeight: 768) == (320, 0, 384, 768))
    var cover = tall
    cover.fit = .cover
    #expect(cover.placement(viewWidth: 1024, viewHeight: 768) == (0, -640, 1024, 2048))
    var stretch = tall
    stretch.fit = .stretch
    #expect(stretch.placement(viewWidth: 1024, viewHeight: 768) == (0, 0, 1024, 768))
}

/// The SVG draws the background under the strokes, outside the eraser's masks.
@Test func svgDrawsTheBackgroundUnderTheStrokes() {
    var board = Board()
    board.apply(.point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .start, x: 100_000, y: 100_000)), author: author)
    board.apply(.point(StrokePoint(stroke: StrokeID(1), tool: .pen, phase: .end, x: 500_000, y: 500_000)), author: author)
    let tall = BackgroundImage(hash: hashA, width: 600, height: 1200, fit: .contain)!
    let svg = BoardSVG.document(board.strokes(on: .first), width: 1024, height: 768, background: (tall, "data:image/png;base64,AAAA"))
    let image = "<svg x=\"0\" y=\"0\" width=\"1024\" height=\"768\"><image x=\"320\" y=\"0\" width=\"384\" height=\"768\" preserveAspectRatio=\"none\" href=\"data:image/png;base64,AAAA\"/></svg>"
    #expect(svg.contains("fill=\"#fff\"/>" + image + "<path"))
    #expect(BoardSVG.document(board.strokes(on: .first)) == BoardSVG.document(board.strokes(on: .first), background: nil))
}
