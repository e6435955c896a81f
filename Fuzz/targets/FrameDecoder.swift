// Native frames (docs/protocol.md section 4): the decoder never traps; whatever it accepts
// round-trips through the encoder; and an ARQ session fed the
// input as a datagram neither traps nor breaks its bounds.

@_cdecl("LLVMFuzzerTestOneInput")
public func frameDecoderFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // Half the inputs get a valid checksum so the parser behind the CRC is explored.
    if let first = bytes.first, first & 1 == 1, bytes.count >= FrameCodec.minFrameBytes {
        let crc = CRC32C.checksum(bytes.dropLast(4))
        bytes.replaceSubrange(bytes.count - 4..<bytes.count,
                              with: [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
    }
    if let frame = try? FrameCodec.decode(bytes) {
        // Reserved flag bits and an empty extension block are ignored, so compare frames.
        guard (try? FrameCodec.decode(FrameCodec.encode(frame))) == frame else { fatalError("frame does not round-trip") }
        let session = ARQSession(connectionID: frame.connectionID, now: .milliseconds(1))
        session.handleDatagram(bytes, now: .milliseconds(2))
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
