import Testing
@testable import InkCodec

private let teacher = AuthorID(7)

/// legacy text -> model -> binary (60 ms live batches) -> model -> legacy text, byte for byte,
/// over the whole lesson; also as history chunks that each start self-contained.
@Test func lessonRoundTripsThroughBinaryBatchesByteForByte() throws {
    guard let text = lessonTrace() else { return }
    let lines = try Trace.parse(text)
    var translator = LegacyTranslator(author: teacher)
    let commands = lines.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }
    let batches = Batch.cut(commands, author: teacher)
    #expect(batches.count == 11_350)

    var sender = BinaryCodecState()
    var receiver = BinaryCodecState()
    var encoder = BinaryBatchEncoder()
    var total = 0
    var decoded: [TimedCommand] = []
    for batch in batches {
        var bytes: [UInt8] = []
        total += try encoder.encode(batch, state: &sender, into: &bytes)
        let back = try BinaryBatchCodec.decode(bytes, state: &receiver)
        #expect(back.author == teacher)
        decoded += back.commands
    }
    #expect(decoded == commands)
    #expect(receiver.context(of: teacher) == sender.context(of: teacher))
    #expect(total == 98_889)  // docs/protocol.md quotes the bench's 98 888 (author 1; author 7 takes 2 more header bits)
    let printed = Trace.format(decoded.map { TraceLine(timeMs: $0.timeMs, message: LegacyMessage(transcribing: $0.command)!) })
    #expect(printed == text)

    // History chunks of 500 commands, each self-contained, decode each with a fresh state.
    var chunkState = BinaryCodecState()
    var chunked: [TimedCommand] = []
    for start in stride(from: 0, to: commands.count, by: 500) {
        let chunk = Array(commands[start..<min(start + 500, commands.count)])
        let bytes = try BinaryBatchCodec.encode(Batch(author: teacher, commands: chunk), state: &chunkState, selfContained: true)
        var fresh = BinaryCodecState()
        chunked += try BinaryBatchCodec.decode(bytes, state: &fresh).commands
    }
    #expect(chunked == commands)
}
