import Testing
@testable import InkCodec

/// Vectors/board-folds.txt: batches folded in order into one board, the digest after each.
@Test func boardFoldVectors() throws {
    var board = Board()
    var generated: [String] = []
    for line in try vectorFile("board-folds.txt") {
        let f = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        try #require(f.count == 4, "\(line)")
        let author = AuthorID(try #require(UInt32(f[1])))
        let commands = f[2] == "-" ? [] : try f[2].split(separator: " ").map { try #require(BinaryText.parse($0), "\(f[0]): \($0)") }
        board.apply(Batch(author: author, commands: commands))
        let digest = String(board.digest, radix: 16)
        let padded = String(repeating: "0", count: 16 - digest.count) + digest
        generated.append("\(f[0]) | \(f[1]) | \(f[2]) | \(padded)")
        #expect(padded == f[3], "\(f[0])")
    }
    // A vector added with DIGEST `0` fails above; its line is printed here to paste in.
    if try vectorFile("board-folds.txt").contains(where: { $0.hasSuffix("| 0") }) {
        print(generated.joined(separator: "\n"))
    }
}

/// Vectors/board-folds.svg: page 0 of the board after the first six lines of board-folds.txt,
/// as `inkwire export --format svg` and the web client (web/lib/render.mjs) draw it.
@Test func boardPictureVector() throws {
    var board = Board()
    for line in try vectorFile("board-folds.txt").prefix(6) {
        let f = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let commands = f[2] == "-" ? [] : try f[2].split(separator: " ").map { try #require(BinaryText.parse($0)) }
        board.apply(Batch(author: AuthorID(try #require(UInt32(f[1]))), commands: commands))
    }
    let svg = BoardSVG.document(board.strokes(on: .first))
    let path = packageRoot.appendingPathComponent("Vectors/board-folds.svg")
    let expected = try? String(contentsOf: path, encoding: .utf8)
    if expected == nil { print(svg) }
    #expect(svg == expected)
    #expect(svg.contains("mask=\"url(#e1)\""))
}

/// Vectors/background-placements.txt: where a background image goes in a view (the web client's
/// `backgroundPlacement` prints the same numbers).
@Test func backgroundPlacementVectors() throws {
    let lines = try vectorFile("background-placements.txt")
    #expect(lines.count >= 10)
    for line in lines {
        let halves = line.split(separator: "|").map { $0.split(separator: " ").map(String.init) }
        let input = halves[0], output = halves[1]
        let fitNumber = try #require(UInt8(input[2]))
        let fit = try #require(BackgroundFit(rawValue: fitNumber))
        let width = try #require(UInt32(input[0]))
        let height = try #require(UInt32(input[1]))
        let image = try #require(BackgroundImage(hash: BlobHash(Array(repeating: 1, count: 32))!, width: width, height: height, fit: fit))
        let viewWidth = try #require(Double(input[3]))
        let viewHeight = try #require(Double(input[4]))
        let p = image.placement(viewWidth: viewWidth, viewHeight: viewHeight)
        #expect([p.x, p.y, p.width, p.height].map(BoardSVG.number) == output, "\(line)")
    }
}

/// Vectors/board-background.svg: the same board over a background image (contain, 800 x 1200).
@Test func boardWithBackgroundPictureVector() throws {
    var board = Board()
    for line in try vectorFile("board-folds.txt").prefix(6) {
        let f = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let commands = f[2] == "-" ? [] : try f[2].split(separator: " ").map { try #require(BinaryText.parse($0)) }
        board.apply(Batch(author: AuthorID(try #require(UInt32(f[1]))), commands: commands))
    }
    let image = try #require(BackgroundImage(hash: BlobHash(Array(repeating: 1, count: 32))!, width: 800, height: 1200, fit: .contain))
    let svg = BoardSVG.document(board.strokes(on: .first), background: (image, "page1.jpg?a=1&b=\"2\""))
    let expected = try? String(contentsOf: packageRoot.appendingPathComponent("Vectors/board-background.svg"), encoding: .utf8)
    if expected == nil { print(svg) }
    #expect(svg == expected)
}
