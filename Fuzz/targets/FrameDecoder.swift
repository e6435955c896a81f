// Frames (docs/protocol.md 4.7, what a sealed packet carries): the decoder never traps;
// whatever it accepts round-trips through the encoder; and an ARQ session fed the input as a
// frame neither traps nor breaks its bounds.

@_cdecl("LLVMFuzzerTestOneInput")
public func frameDecoderFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let frame = try? FrameCodec.decode(bytes) {
        // Reserved flag bits and an empty extension block are ignored, so compare frames.
        guard (try? FrameCodec.decode(FrameCodec.encode(frame))) == frame else { fatalError("frame does not round-trip") }
        guard FrameCodec.encodedSize(of: frame) == FrameCodec.encode(frame).count else { fatalError("size disagrees") }
        let session = ARQSession(now: .milliseconds(1))
        session.handleFrame(frame, datagramBytes: bytes.count, now: .milliseconds(2))
        session.handleTimeout(now: .milliseconds(100))
        var n = 0
        while session.pollTransmit(now: .milliseconds(100)) != nil {
            n += 1
            if n > 1000 { fatalError("session keeps transmitting") }
        }
        while session.pollEvent() != nil {}
    }
    return 0
}
