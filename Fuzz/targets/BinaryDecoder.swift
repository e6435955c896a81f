// Compact binary batches: decoding never traps; a decoded batch re-encodes (from the same state)
// to exactly the input bytes (the encoding is canonical); the stream form never traps either.
// Both decode entry points (into an array, into a caller's buffer, sometimes too small) agree:
// the same commands, or the same error with the state unchanged.

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
    let before = state
    var sender = state
    let arrayResult: Result<Batch, BinaryCodecError>
    do throws(BinaryCodecError) {
        arrayResult = .success(try BinaryBatchCodec.decode(input, state: &state))
    } catch {
        arrayResult = .failure(error)
    }
    switch arrayResult {
    case .success(let batch):
        let selfContained = BinaryBatchCodec.isSelfContained(input)
        guard let again = try? BinaryBatchCodec.encode(batch, state: &sender, selfContained: selfContained), again == input else {
            fatalError("decoded batch does not re-encode to its input")
        }
    case .failure:
        guard sameState(state, before) else { fatalError("array decode changed the state on error") }
    }
    // Mode bit 1: a small buffer (0-63 commands, often too small); else one sized from the input.
    let capacity = mode & 2 == 2 ? Int(mode >> 2) : min(Batch.maxCommands, 16 * input.count + 16)
    var bufferResult = decodeIntoBuffer(input, before, capacity: capacity)
    if case .failure(.tooManyCommands) = bufferResult, case .failure(let error) = arrayResult, error != .tooManyCommands {
        // The buffer filled up before the array decode met its error: a buffer that always
        // suffices must meet the same error.
        bufferResult = decodeIntoBuffer(input, before, capacity: Batch.maxCommands)
    }
    switch (arrayResult, bufferResult) {
    case (.success(let batch), .success(let (author, commands, after))):
        guard author == batch.author, commands == batch.commands, sameState(after, state) else {
            fatalError("buffer decode differs from array decode")
        }
    case (.success(let batch), .failure(let error)):
        guard error == .tooManyCommands, capacity < batch.commands.count else {
            fatalError("buffer decode failed (\(error)) where array decode succeeded")
        }
    case (.failure(let error), .failure(let bufferError)):
        guard error == bufferError else { fatalError("decode errors differ: \(error) vs \(bufferError)") }
    case (.failure(let error), .success):
        fatalError("buffer decode succeeded where array decode failed (\(error))")
    }
    _ = try? BinaryBatchStream.decode(BinaryBatchStream.magic + input)
    return 0
}

/// The buffer entry point from a copy of `state`: the author, the commands and the state after,
/// or the error (checking the state is unchanged then).
private func decodeIntoBuffer(
    _ input: [UInt8], _ state: BinaryCodecState, capacity: Int
) -> Result<(AuthorID, [TimedCommand], BinaryCodecState), BinaryCodecError> {
    var copy = state
    let buffer = UnsafeMutableBufferPointer<TimedCommand>.allocate(capacity: capacity)
    defer { buffer.deallocate() }
    let result = input.withUnsafeBytes { raw -> Result<(author: AuthorID, count: Int), BinaryCodecError> in
        do throws(BinaryCodecError) {
            return .success(try BinaryBatchDecoder.decode(raw, state: &copy, into: buffer))
        } catch {
            return .failure(error)
        }
    }
    switch result {
    case .success(let (author, count)):
        guard count <= capacity else { fatalError("buffer decode overran its buffer") }
        let commands = Array(buffer[0..<count])
        buffer.baseAddress?.deinitialize(count: count)
        return .success((author, commands, copy))
    case .failure(let error):
        guard sameState(copy, state) else { fatalError("buffer decode changed the state on error") }
        return .failure(error)
    }
}

/// Whether two states agree on what a decoder can see: the last author and the contexts of
/// the authors a fuzzed batch can reach cheaply (0, 1, 2 and the last one).
private func sameState(_ a: BinaryCodecState, _ b: BinaryCodecState) -> Bool {
    guard a.lastAuthor == b.lastAuthor else { return false }
    var authors = [AuthorID(0), AuthorID(1), AuthorID(2)]
    if let last = a.lastAuthor { authors.append(last) }
    return authors.allSatisfy { a.context(of: $0) == b.context(of: $0) }
}
