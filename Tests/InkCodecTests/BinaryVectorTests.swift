import Testing
@testable import InkCodec

@Test func binaryBatchVectors() throws {
    var sender = BinaryCodecState()
    var receiver = BinaryCodecState()
    var generated: [String] = []
    for line in try vectorFile("binary-batches.txt") {
        let f = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        try #require(f.count == 4, "\(line)")
        let head = f[1].split(separator: " ")
        let author = AuthorID(try #require(UInt32(head[0])))
        let selfContained = head[1] == "1"
        let commands = f[2] == "-" ? [] : try f[2].split(separator: " ").map { try #require(BinaryText.parse($0), "\(f[0]): \($0)") }
        let batch = Batch(author: author, commands: commands)
        #expect(commands.map(BinaryText.format).joined(separator: " ") == (f[2] == "-" ? "" : f[2]), "\(f[0])")
        let bytes = try BinaryBatchCodec.encode(batch, state: &sender, selfContained: selfContained)
        generated.append("\(f[0]) | \(f[1]) | \(f[2]) | \(hex(bytes))")
        #expect(hex(bytes) == f[3], "\(f[0])")
        let expected = unhex(f[3]) ?? bytes
        #expect(try BinaryBatchCodec.decode(expected, state: &receiver) == batch, "\(f[0])")
    }
    // A vector added with HEX `?` fails above; its line is printed here to paste in.
    if try vectorFile("binary-batches.txt").contains(where: { $0.hasSuffix("| ?") }) {
        print(generated.joined(separator: "\n"))
    }
}

@Test func binaryInvalidVectors() throws {
    for line in try vectorFile("binary-invalid.txt") {
        let f = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        try #require(f.count == 3, "\(line)")
        let bytes = try #require(unhex(f[1]), "\(f[0])")
        var state = BinaryCodecState()
        var reason = "ok"
        do { _ = try BinaryBatchCodec.decode(bytes, state: &state) } catch { reason = "\(error)".split(separator: "(").first.map(String.init) ?? "" }
        #expect("error \(reason)" == f[2], "\(f[0])")
    }
}
