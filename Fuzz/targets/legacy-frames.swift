// Legacy TCP frames: the decoder never traps, and splitting the input at a position chosen by
// the first byte gives exactly the frames (and error) of the unsplit input.

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
    return 0
}
