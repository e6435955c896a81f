import Testing
@testable import InkCodec

@Test func lessonATraceRoundTripsThroughLiveBatches() throws {
    guard let text = BinaryTraceSupport.lessonA() else { return }
    let commands = BinaryTraceSupport.commands(text)
    let batches = Batch.cut(commands, author: AuthorID(7))
    var sender = BinaryCodecState()
    var receiver = BinaryCodecState()
    var total = 0
    var decoded: [TimedCommand] = []
    for batch in batches {
        let bytes = try BinaryBatchCodec.encode(batch, state: &sender)
        total += bytes.count
        let back = try BinaryBatchCodec.decode(bytes, state: &receiver)
        #expect(back.author == batch.author)
        decoded += back.commands
    }
    #expect(decoded == commands)
    print("binary: \(batches.count) batches, \(total) bytes, \(Double(total) / 27744) B/point")
}
