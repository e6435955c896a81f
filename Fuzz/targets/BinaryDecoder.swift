// Compact binary batches: decoding never traps; a decoded batch re-encodes (from the same state)
// to exactly the input bytes (the encoding is canonical); the stream form never traps either.

@_cdecl("LLVMFuzzerTestOneInput")
public func binaryDecoderFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    var state = BinaryCodecState()
    if mode & 1 == 1 {
        // A receiver that already has a context: an open stroke of author 1 on the frame grid.
        let primer = Batch(author: AuthorID(1), commands: [
            TimedCommand(timeMs: 1017, command: .point(StrokePoint(stroke: StrokeID(3), phase: .start, x: 266_667, y: 331_675))),
            TimedCommand(timeMs: 1033, command: .point(StrokePoint(stroke: StrokeID(3), phase: .move, x: 267_000, y: 332_000))),
        ])
        guard (try? BinaryBatchCodec.encode(primer, state: &state)) != nil else { fatalError("primer") }
    }
    var sender = state
    if let batch = try? BinaryBatchCodec.decode(input, state: &state) {
        let selfContained = BinaryBatchCodec.isSelfContained(input)
        guard let again = try? BinaryBatchCodec.encode(batch, state: &sender, selfContained: selfContained), again == input else {
            fatalError("decoded batch does not re-encode to its input")
        }
    }
    _ = try? BinaryBatchStream.decode(BinaryBatchStream.magic + input)
    return 0
}
