// Session messages and TCP stream framing (docs/protocol.md sections 5a and 8): neither decoder
// traps; a message either side accepts decodes again to the same value after re-encoding; the
// stream decoder, fed the input in uneven pieces, never buffers past its bound.

@_cdecl("LLVMFuzzerTestOneInput")
public func sessionMessagesFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let message = try? SessionMessageCodec.decodeClient(bytes) {
        guard (try? SessionMessageCodec.decodeClient(SessionMessageCodec.encode(message))) == message else {
            fatalError("client message does not round-trip")
        }
    }
    if let message = try? SessionMessageCodec.decodeServer(bytes) {
        guard (try? SessionMessageCodec.decodeServer(SessionMessageCodec.encode(message))) == message else {
            fatalError("server message does not round-trip")
        }
    }
    let maxFrame = 256
    var stream = StreamFrameDecoder(maxFrameBytes: maxFrame)
    var offset = 0
    var piece = 1
    feeding: while offset < bytes.count {
        let end = min(bytes.count, offset + piece)
        stream.handleBytes(Array(bytes[offset..<end]))
        offset = end
        piece = piece % 7 + 1
        while true {
            let frame: [UInt8]?
            do { frame = try stream.pollFrame() } catch { break feeding }  // a bad length ends the stream
            guard let frame else { break }  // needs more bytes
            guard frame.count <= maxFrame else { fatalError("frame over its bound") }
            _ = try? SessionMessageCodec.decodeClient(frame)
        }
        guard stream.bufferedByteCount <= maxFrame + StreamFrameDecoder.headerBytes + 7 else {
            fatalError("stream decoder buffers past its bound")
        }
    }
    return 0
}
