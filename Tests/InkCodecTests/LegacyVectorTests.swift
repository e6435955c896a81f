import Testing
@testable import InkCodec

private func caseName(_ error: LegacyTextError) -> String {
    switch error {
    case .empty: "empty"
    case .oversize: "oversize"
    case .fieldCount: "fieldCount"
    case .notANumber: "notANumber"
    case .notFinite: "notFinite"
    case .tooManyDecimals: "tooManyDecimals"
    case .valueOutOfRange: "valueOutOfRange"
    case .coordinateOutOfRange: "coordinateOutOfRange"
    case .unknownCode: "unknownCode"
    }
}

private func fields(_ message: LegacyMessage) -> [String] {
    switch message {
    case .point(_, let x, let y, let phase): ["\(message.code)", "\(x)", "\(y)", "\(phase.rawValue)"]
    case .penStyle(let s): ["3", "\(s.color)", "\(s.width)"]
    case .undo, .redo, .clear: ["\(message.code)"]
    }
}

@Test func legacyTextVectors() throws {
    let lines = try vectorFile("legacy-text.txt")
    #expect(lines.count >= 30)
    for line in lines {
        let parts = line.components(separatedBy: " | ")
        try #require(parts.count == 3, "\(line)")
        let payload = try #require(unhex(parts[1]), "\(line)")
        let result = parts[2].split(separator: " ").map(String.init)
        do {
            let message = try LegacyMessage(parsing: payload)
            #expect(result.first == "ok", "\(parts[0]) parsed")
            if let at = result.firstIndex(of: "canonical") {
                #expect(Array(result[1..<at]) == fields(message), "\(parts[0])")
                #expect(hex(message.bytes) == result[at + 1], "\(parts[0])")
            } else {
                #expect(Array(result.dropFirst()) == fields(message), "\(parts[0])")
                #expect(message.bytes == payload, "\(parts[0])")
            }
        } catch {
            #expect(result == ["error", caseName(error)], "\(parts[0])")
        }
    }
}

@Test func legacyFrameVectors() throws {
    let lines = try vectorFile("legacy-frames.txt")
    #expect(lines.count >= 15)
    for line in lines {
        let parts = line.components(separatedBy: " | ")
        try #require(parts.count == 4, "\(line)")
        let stream = try #require(unhex(parts[1]), "\(line)")
        let expected: [LegacyFrame] = try parts[2] == "-" ? [] : parts[2].split(separator: " ").map { token in
            if token == "hb" { return .heartbeat }
            let pieces = token.split(separator: ":", omittingEmptySubsequences: false)
            let command = try #require(UInt16(pieces[0]))
            return .data(command: command, payload: try #require(unhex(pieces[1])))
        }
        // Whole, and at every split point.
        for cut in 0...stream.count {
            var decoder = LegacyFrameDecoder()
            var frames: [LegacyFrame] = []
            var failure: LegacyFrameError?
            do {
                for chunk in [stream[..<cut], stream[cut...]] {
                    try decoder.handleBytes(chunk)
                    while let frame = try decoder.pollFrame() { frames.append(frame) }
                }
            } catch {
                failure = error
            }
            #expect(frames == expected, "\(parts[0]) cut \(cut)")
            switch parts[3] {
            case "error frameTooLarge":
                if case .frameTooLarge = failure {} else { Issue.record("\(parts[0]) cut \(cut): \(String(describing: failure))") }
            default:
                #expect(failure == nil)
                #expect("pending \(decoder.bufferedByteCount)" == parts[3], "\(parts[0])")
                let encoded = expected.flatMap(\.bytes)
                #expect(encoded == Array(stream.prefix(encoded.count)), "\(parts[0])")
            }
        }
    }
}
