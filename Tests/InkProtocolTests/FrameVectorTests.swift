import Foundation
import Testing
@testable import InkProtocol

/// Reads `Vectors/frames-*.txt` (blocks of `key: value` lines separated by blank lines).
private func vectorBlocks(_ file: String) throws -> [[(String, String)]] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent("Vectors/\(file)"), encoding: .utf8)
    var blocks: [[(String, String)]] = []
    var current: [(String, String)] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.hasPrefix("#") { continue }
        if line.trimmingCharacters(in: .whitespaces).isEmpty {
            if !current.isEmpty { blocks.append(current) }
            current = []
            continue
        }
        guard let colon = line.firstIndex(of: ":") else { continue }
        let key = String(line[..<colon])
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        current.append((key, value))
    }
    if !current.isEmpty { blocks.append(current) }
    return blocks
}

private func hexBytes(_ s: String) -> [UInt8] {
    let digits = Array(s.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count - 1, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

private func hexString(_ b: [UInt8]) -> String {
    b.map { let h = String($0, radix: 16); return h.count == 1 ? "0" + h : h }.joined(separator: " ")
}

private func frame(from block: [(String, String)]) -> Frame {
    var f = Frame(timestamp: 0)
    for (key, value) in block {
        let words = value.split(separator: " ").map(String.init)
        switch key {
        case "kind": f.kind = value == "close" ? .close : .data
        case "timestamp": f.timestamp = UInt32(value)!
        case "ack-now": f.ackNow = value == "true"
        case "ack" where value != "none":
            f.ack = AckBlock(cumulative: SequenceNumber(UInt32(words[0])!), echoedTimestamp: UInt32(words[1])!,
                             ackDelay: UInt32(words[2])!, window: UInt32(words[3])!,
                             ranges: words.dropFirst(4).map { r in
                                 let p = r.split(separator: "+")
                                 return SequenceRange(start: SequenceNumber(UInt32(p[0])!), count: UInt32(p[1])!)
                             })
        case "extension":
            f.extensions.append(FrameExtension(type: UInt64(words[0])!, value: hexBytes(words.count > 1 ? words[1] : "")))
        case "segment":
            f.segments.append(Segment(sequence: SequenceNumber(UInt32(words[0])!), endOfMessage: words[1] == "true",
                                      payload: hexBytes(words.count > 2 ? words[2] : "")))
        default: break
        }
    }
    return f
}

@Suite struct FrameVectorTests {
    @Test func validVectorsEncodeAndDecodeExactly() throws {
        let blocks = try vectorBlocks("frames-valid.txt")
        #expect(blocks.count >= 7)
        for block in blocks {
            let name = block.first { $0.0 == "name" }?.1 ?? "?"
            let expected = frame(from: block)
            let encoded = FrameCodec.encode(expected)
            guard let hex = block.first(where: { $0.0 == "hex" })?.1 else {
                Issue.record("\(name): missing hex; encoder gives\nhex: \(hexString(encoded))")
                continue
            }
            #expect(hexString(encoded) == hexString(hexBytes(hex)), "\(name)")
            #expect(FrameCodec.encodedSize(of: expected) == encoded.count, "\(name)")
            #expect(try FrameCodec.decode(hexBytes(hex)) == expected, "\(name)")
        }
    }

    @Test func invalidVectorsFailWithTheirError() throws {
        let blocks = try vectorBlocks("frames-invalid.txt")
        #expect(blocks.count >= 12)
        for block in blocks {
            let fields = Dictionary(block, uniquingKeysWith: { a, _ in a })
            let name = fields["name"] ?? "?"
            let bytes = hexBytes(fields["hex"] ?? "")
            do {
                let f = try FrameCodec.decode(bytes)
                Issue.record("\(name): decoded \(f)")
            } catch {
                #expect("\(error)" == fields["error"], "\(name)")
            }
        }
    }
}
