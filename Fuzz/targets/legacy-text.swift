// fuzz-modules: InkLegacy
// Legacy text messages: parsing never traps; whatever parses prints back to text that parses to
// the same message; the translator reads it; and a LegacySession takes it both ways (from its
// app, and as another author's command for its app) and writes only chunks the app can read.

@_cdecl("LLVMFuzzerTestOneInput")
public func legacyTextFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let message = try? LegacyMessage(parsing: bytes) else { return 0 }
    let printed = message.bytes
    guard let again = try? LegacyMessage(parsing: printed), again == message, again.bytes == printed else {
        fatalError("legacy text did not round trip")
    }
    var inbound = LegacyTranslator(author: AuthorID(1))
    let command = inbound.command(from: message)
    guard LegacyMessage(transcribing: command) == message else { fatalError("transcription differs") }
    if case .point(let p) = command {
        // A coordinate's text must equal the %f rounding of its own value.
        guard LegacyNumber.millionths(printfRounding: Double(p.x) / 1_000_000) == p.x else { fatalError("rounding") }
    }
    let session = LegacySession(now: .zero)
    session.handleJoined(author: AuthorID(9), board: Board(), now: .zero)
    let now = Instant.milliseconds(2000)
    session.handleBytes(LegacyFrame.text(message).bytes, now: now)
    // Another author's stroke containing the command, ended, as the room would have it.
    session.handleRoomBatch(author: AuthorID(1), commands: [TimedCommand(timeMs: 0, command: command),
                                                            TimedCommand(timeMs: 0, command: .point(StrokePoint(stroke: StrokeID(1), phase: .end, x: 0, y: 0)))],
                            own: false, now: now)
    session.handleTimeout(now: now + .milliseconds(1100))
    while session.pollEvent() != nil {}
    var chunks = 0
    while let chunk = session.pollTransmit(now: now + .milliseconds(1100)) {
        guard chunk.count == LegacySessionLimits.chunkBytes else { fatalError("chunk of \(chunk.count) bytes") }
        chunks += 1
        if chunks > 64 { fatalError("a session keeps writing with nothing new") }
    }
    return 0
}
