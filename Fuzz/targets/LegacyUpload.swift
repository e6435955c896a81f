// The legacy app's image upload (docs/protocol.md 3, Image upload): the receiver never traps,
// fed the input in uneven pieces; whatever it completes has exactly the announced length and
// arrives again whole when sent the way the app sends it.

@_cdecl("LLVMFuzzerTestOneInput")
public func legacyUploadFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var receiver = LegacyUploadReceiver(maxImageBytes: 8192)
    var offset = 0
    var piece = 1
    while offset < bytes.count {
        let end = min(bytes.count, offset + piece)
        do { try receiver.handleBytes(bytes[offset..<end]) } catch { return 0 }  // refused: the connection closes
        offset = end
        piece = piece % 1031 + 1
    }
    guard let image = receiver.image else { return 0 }
    guard image.count <= 8192, !image.isEmpty else { fatalError("an image past the bound was taken") }
    var again = LegacyUploadReceiver(maxImageBytes: 8192)
    var wire: [UInt8] = []
    for frame in LegacyUploadSender.frames(for: image) { frame.append(to: &wire) }
    do { try again.handleBytes(wire) } catch { fatalError("the app's own form of the image is refused: \(error)") }
    guard again.image == image else { fatalError("the app's own form does not arrive whole") }
    return 0
}
