// fuzz-modules: InkLegacy
// Legacy TCP frames: the decoder never traps, and splitting the input at a position chosen by
// the first byte gives exactly the frames (and error) of the unsplit input. The same bytes, as
// an app's reads, drive a LegacySession: it never traps and writes only whole 1030-byte chunks.

private func decode(_ chunks: [ArraySlice<UInt8>]) -> ([LegacyFrame], LegacyFrameError?) {
    var decoder = LegacyFrameDecoder()
    var frames: [LegacyFrame] = []
    do {
        for chunk in chunks {
            try decoder.handleBytes(chunk)
            while let frame = try decoder.pollFrame() { frames.append(frame) }
        }
    } catch {
        return (frames, error)
    }
    return (frames, nil)
}

/// A chunk the app can read: exactly 1030 bytes of whole frames, every text one it can show.
private func checkChunk(_ chunk: [UInt8]) {
    guard chunk.count == LegacySessionLimits.chunkBytes else { fatalError("chunk of \(chunk.count) bytes") }
    var decoder = LegacyFrameDecoder()
    do {
        try decoder.handleBytes(chunk)
        while let frame = try decoder.pollFrame() {
            guard case .data(_, let payload) = frame else { continue }
            if payload.allSatisfy({ $0 == UInt8(ascii: "0") }) { continue }  // filler
            guard (try? LegacyMessage(parsing: payload)) != nil else { fatalError("unreadable frame in a chunk") }
        }
    } catch {
        fatalError("chunk does not decode: \(error)")
    }
    guard decoder.bufferedByteCount == 0 else { fatalError("a frame crosses a chunk") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func legacyFramesFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    let stream = bytes.dropFirst()
    let whole = decode([stream])
    let cut = stream.startIndex + Int(first) % (stream.count + 1)
    let split = decode([stream[..<cut], stream[cut...]])
    let single = decode(stream.indices.map { stream[$0...$0] })
    guard whole.0 == split.0, whole.1 == split.1, whole.0 == single.0, whole.1 == single.1 else {
        fatalError("frames depend on how the stream was split")
    }
    if whole.1 == nil {
        let reencoded = whole.0.flatMap(\.bytes)
        guard reencoded == Array(stream.prefix(reencoded.count)) else { fatalError("frames do not re-encode") }
    }
    // The same bytes as an app's two reads, 30 ms apart, into a session that has a board.
    let session = LegacySession(now: .zero)
    var board = Board()
    board.apply(.point(StrokePoint(stroke: StrokeID(1), phase: .start, x: 1, y: 2)), author: AuthorID(2))
    board.apply(.point(StrokePoint(stroke: StrokeID(1), phase: .end, x: 3, y: 4)), author: AuthorID(2))
    session.handleJoined(author: AuthorID(1), board: board, now: .zero)
    var now = Instant.milliseconds(1500)
    for part in [stream[..<cut], stream[cut...]] {
        session.handleBytes(part, now: now)
        while let event = session.pollEvent() {
            if case .submit(let commands) = event {
                session.handleRoomBatch(author: AuthorID(1), commands: commands, own: true, now: now)
            }
        }
        while let chunk = session.pollTransmit(now: now) { checkChunk(chunk) }
        now = now + .milliseconds(30)
        session.handleTimeout(now: now)
    }
    return 0
}
