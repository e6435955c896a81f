// Legacy text messages: parsing never traps; whatever parses prints back to text that parses to
// the same message; the translator accepts it in both directions.

@_cdecl("LLVMFuzzerTestOneInput")
public func legacyTextFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let message = try? LegacyMessage(parsing: bytes) else { return 0 }
    let printed = message.bytes
    guard let again = try? LegacyMessage(parsing: printed), again == message, again.bytes == printed else {
        fatalError("legacy text did not round trip")
    }
    var inbound = LegacyTranslator(author: AuthorID(1))
    var outbound = LegacyTranslator(author: AuthorID(2))
    let command = inbound.command(from: message)
    guard LegacyMessage(transcribing: command) == message else { fatalError("transcription differs") }
    _ = outbound.messages(for: command, author: AuthorID(1))
    if case .point(let p) = command {
        // A coordinate's text must equal the %f rounding of its own value.
        guard LegacyNumber.millionths(printfRounding: Double(p.x) / 1_000_000) == p.x else { fatalError("rounding") }
    }
    return 0
}
