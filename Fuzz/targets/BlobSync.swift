// fuzz-modules: InkRelay
// Blob sync (docs/protocol.md 6a): the input is a sequence of session messages, each a length
// byte and its bytes, fed to a relay (as a teacher's and a viewer's messages) and to a device's
// RoomFollower (as the daemon's). Nothing traps; the relay never stores an upload whose bytes
// do not hash to its name; the follower never hands over a blob that does not match its hash.

private let hasher = FakeCrypto(seed: 7)

private final class FuzzBlobs: RoomBlobs {
    var stored: [BlobHash: [UInt8]] = [:]
    func imageSize(room: String, hash: BlobHash) -> ImageSize? { stored[hash] == nil ? nil : ImageSize(width: 4, height: 3) }
    func readBlob(room: String, hash: BlobHash) -> [UInt8]? { stored[hash] }
    func storeImage(room: String, hash: BlobHash, bytes: [UInt8], now: Instant) -> Result<ImageSize, BlobRefusal> {
        guard hasher.sha256(bytes) == hash.bytes else { return .failure(BlobRefusal("hash")) }
        stored[hash] = bytes
        return .success(ImageSize(width: 4, height: 3))
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func blobSyncFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var limits = RelayLimits()
    limits.maxBlobBytes = 4096
    limits.blobChunkBytes = 64
    let relay = Relay(configuration: RelayConfiguration(limits: limits))
    let blobs = FuzzBlobs()
    relay.blobs = blobs
    let teacher = SessionID(1), viewer = SessionID(2)
    relay.handleSessionOpened(teacher, transport: .udp, now: .zero)
    relay.handleSessionOpened(viewer, transport: .udp, now: .zero)
    relay.handle(.join(JoinRequest(room: "r", user: "t", role: .teacher, origin: 1)), from: teacher, now: .zero)
    relay.handle(.join(JoinRequest(room: "r", user: "v", role: .viewer, origin: 2)), from: viewer, now: .zero)
    var follower = RoomFollower(origin: 3, blobHash: { hasher.sha256($0) })
    _ = follower.join(room: "r", user: "d", role: .viewer)
    var i = 0
    var n = 0
    while i < bytes.count {
        let length = Int(bytes[i])
        i += 1
        let message = Array(bytes[i..<min(bytes.count, i + length)])
        i += length
        n += 1
        relay.handleMessage(message, from: n % 2 == 0 ? teacher : viewer, now: .zero)
        if n % 5 == 0 { relay.handleBackpressure(viewer, now: .zero) }
        if n % 5 == 2 { relay.handleReady(viewer, now: .zero) }
        while relay.pollOutput() != nil {}
        if let m = try? SessionMessageCodec.decodeServer(message) {
            for event in follower.handle(m) {
                if case .blob(let hash, let blob) = event, hasher.sha256(blob) != hash.bytes { fatalError("a blob that does not match its hash") }
            }
        }
    }
    for (hash, blob) in blobs.stored where hasher.sha256(blob) != hash.bytes { fatalError("stored under another hash") }
    return 0
}
