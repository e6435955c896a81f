import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// Stands in for the daemon's store: a "decodable image" here starts with 0xFF.
private final class FakeBlobs: RoomBlobs {
    var blobs: [String: [BlobHash: [UInt8]]] = [:]
    var reads = 0
    func imageSize(room: String, hash: BlobHash) -> ImageSize? {
        blobs[room]?[hash] == nil ? nil : ImageSize(width: 40, height: 30)
    }
    func readBlob(room: String, hash: BlobHash) -> [UInt8]? {
        reads += 1
        return blobs[room]?[hash]
    }
    func storeImage(room: String, hash: BlobHash, bytes: [UInt8], now: Instant) -> Result<ImageSize, BlobRefusal> {
        guard testHash(bytes) == hash else { return .failure(BlobRefusal("the image's bytes do not match its hash")) }
        guard bytes.first == 0xFF else { return .failure(BlobRefusal("not a JPEG or PNG image")) }
        blobs[room, default: [:]][hash] = bytes
        return .success(ImageSize(width: 40, height: 30))
    }
}

private let hasher = FakeCrypto(seed: 1)
private func testHash(_ bytes: [UInt8]) -> BlobHash { BlobHash(hasher.sha256(bytes))! }
private func image(_ size: Int, seed: UInt8) -> [UInt8] { [0xFF] + (1..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) } }

/// A device as `inkwire` is one: a `RoomFollower` whose replies go back to the relay.
private struct Member {
    let session: SessionID
    var follower: RoomFollower
    var blobs: [BlobHash: [UInt8]] = [:]
    var stored: [BlobHash] = []
    var errors: [SessionErrorCode] = []
    /// Every message received, in order.
    var log: [ServerMessage] = []

    init(_ h: Harness, _ id: UInt64, user: String, role: MemberRole) {
        session = h.open(id)
        follower = RoomFollower(origin: 100 + id, blobHash: { hasher.sha256($0) })
        let join = follower.join(room: "r", user: user, role: role)
        h.deliver(join, from: session)
    }

    /// Delivers what the relay sent and sends the replies, until nothing moves.
    mutating func run(_ h: Harness) {
        while true {
            let messages = h.take(session)
            if messages.isEmpty { return }
            for m in messages {
                log.append(m)
                for e in follower.handle(m) {
                    switch e {
                    case .reply(let r): h.deliver(r, from: session)
                    case .blob(let hash, let bytes): blobs[hash] = bytes
                    case .blobStored(let hash, _, _): stored.append(hash)
                    case .error(let code, _, _): errors.append(code)
                    default: break
                    }
                }
            }
        }
    }

    mutating func upload(_ h: Harness, _ bytes: [UInt8], part: Int = 10_000) {
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + part)
            h.deliver(.blobPut(hash: testHash(bytes), size: UInt32(bytes.count), offset: UInt32(offset), data: Array(bytes[offset..<end])), from: session)
            offset = end
        }
        run(h)
    }

    mutating func draw(_ h: Harness, _ commands: [Command]) {
        let m = try! follower.submit(commands.map { TimedCommand(timeMs: 0, command: $0) })
        h.deliver(m, from: session)
        run(h)
    }

    func chunkBytes(_ hash: BlobHash) -> Int {
        log.reduce(0) { total, m in
            if case .blobChunk(let h, _, _, _, let data) = m, h == hash { return total + data.count }
            return total
        }
    }
}

private func background(_ bytes: [UInt8], page: PageID = .first) -> Command {
    .background(PageBackground(page: page, image: BackgroundImage(hash: testHash(bytes), width: 40, height: 30)!))
}

/// An upload is stored once; watchers and a late joiner fetch exactly that image, each once,
/// the late joiner's strokes (its sync) before any of the image; a member that has it is not
/// sent it again.
@Test func uploadedBackgroundsReachEveryMemberOnce() {
    let h = Harness()
    let blobs = FakeBlobs()
    h.relay.blobs = blobs
    var teacher = Member(h, 1, user: "t", role: .teacher)
    var watcher = Member(h, 2, user: "w", role: .viewer)
    teacher.run(h)
    watcher.run(h)

    let photo = image(100_000, seed: 3)
    let hash = testHash(photo)
    teacher.upload(h, photo)
    #expect(teacher.stored == [hash])
    #expect(blobs.blobs["r"]?[hash] == photo)
    teacher.upload(h, photo)
    #expect(teacher.stored == [hash, hash], "known: answered at the first part")

    teacher.draw(h, [.point(StrokePoint(stroke: StrokeID(1), phase: .start, x: 1, y: 1)), background(photo)])
    h.durable("r", 1)
    teacher.run(h)
    watcher.run(h)
    #expect(watcher.follower.board.backgrounds[.first]?.hash == hash)
    #expect(watcher.blobs[hash] == photo)
    #expect(watcher.chunkBytes(hash) == photo.count, "sent once")

    // Page 1 gets the same image: the watcher has it and asks for nothing.
    teacher.draw(h, [.addPage(PageID(1)), background(photo, page: PageID(1))])
    watcher.run(h)
    #expect(watcher.chunkBytes(hash) == photo.count)

    // A late joiner: snapshot first (the strokes), the image after its sync is done.
    for i in 0..<50 { teacher.draw(h, [.point(StrokePoint(stroke: StrokeID(10 + UInt32(i)), phase: .start, x: Int32(i), y: 5))]) }
    var late = Member(h, 3, user: "late", role: .viewer)
    late.run(h)
    #expect(late.blobs[hash] == photo)
    #expect(late.follower.board.digest == teacher.follower.board.digest || late.follower.board.strokeCount > 0)
    let firstChunk = late.log.firstIndex { if case .blobChunk = $0 { true } else { false } }!
    let syncDone = late.log.firstIndex { if case .syncDone = $0 { true } else { false } }!
    #expect(syncDone < firstChunk, "strokes first, then the background")
    #expect(late.chunkBytes(hash) == photo.count)
    #expect(blobs.reads == 1, "one read shared through the relay's cache")
}

/// Chunks stop while the member's transport pushes back and resume when it is ready; at most
/// `blobChunksInFlight` chunks are unacknowledged.
@Test func blobChunksRespectBackpressureAndTheWindow() {
    var limits = RelayLimits()
    limits.blobChunkBytes = 1000
    limits.blobChunksInFlight = 4
    let h = Harness(limits: limits)
    let blobs = FakeBlobs()
    h.relay.blobs = blobs
    var teacher = Member(h, 1, user: "t", role: .teacher)
    teacher.run(h)
    let photo = image(20_500, seed: 9)
    teacher.upload(h, photo)
    teacher.draw(h, [background(photo)])
    let watcher = h.open(2)
    h.deliver(.join(JoinRequest(room: "r", user: "w", role: .viewer, origin: 9)), from: watcher)
    _ = h.take(watcher)
    let hash = testHash(photo)
    h.deliver(.blobRequest(hash: hash, firstChunk: 0), from: watcher)
    var chunks = h.take(watcher).compactMap { m -> UInt32? in if case .blobChunk(_, _, let i, let count, _) = m { #expect(count == 21); return i } else { return nil } }
    #expect(chunks == [0, 1, 2, 3])
    h.block(watcher)
    h.deliver(.blobAck(hash: hash, chunk: 1), from: watcher)
    #expect(h.take(watcher).isEmpty, "blocked: nothing more")
    h.ready(watcher)
    chunks = h.take(watcher).compactMap { m -> UInt32? in if case .blobChunk(_, _, let i, _, _) = m { i } else { nil } }
    #expect(chunks == [4, 5])
    // A resumed fetch (after a reconnect) starts where the device says.
    h.deliver(.blobRequest(hash: hash, firstChunk: 19), from: watcher)
    chunks = h.take(watcher).compactMap { m -> UInt32? in if case .blobChunk(_, _, let i, _, _) = m { i } else { nil } }
    #expect(chunks == [19, 20])
    h.deliver(.blobRequest(hash: testHash([1, 2, 3]), firstChunk: 0), from: watcher)
    #expect(h.take(watcher) == [.blobMissing(hash: testHash([1, 2, 3]))])
}

/// Hostile uploads and batches: refused with a reason, nothing stored, the room goes on.
@Test func hostileUploadsAreRefusedAndTheRoomGoesOn() {
    var limits = RelayLimits()
    limits.maxBlobBytes = 50_000
    let h = Harness(limits: limits)
    let blobs = FakeBlobs()
    h.relay.blobs = blobs
    var teacher = Member(h, 1, user: "t", role: .teacher)
    var viewer = Member(h, 2, user: "v", role: .viewer)
    teacher.run(h)
    viewer.run(h)
    let photo = image(30_000, seed: 1)
    let hash = testHash(photo)

    // A part with no upload under way is ignored (the rest of an upload already answered);
    // then parts out of order, a wrong hash, not an image, too large: each refused.
    h.deliver(.blobPut(hash: hash, size: 30_000, offset: 10_000, data: Array(photo[10_000..<20_000])), from: teacher.session)
    h.deliver(.blobPut(hash: hash, size: 30_000, offset: 0, data: Array(photo[0..<10_000])), from: teacher.session)
    h.deliver(.blobPut(hash: hash, size: 30_000, offset: 15_000, data: Array(photo[15_000..<20_000])), from: teacher.session)
    teacher.upload(h, Array(photo.prefix(29_000)) + [UInt8](repeating: 0, count: 1000), part: 7000)  // hash of other bytes: fine, different hash
    var wrong = photo
    wrong[5] ^= 1
    var offset = 0
    while offset < wrong.count {
        h.deliver(.blobPut(hash: hash, size: UInt32(wrong.count), offset: UInt32(offset), data: Array(wrong[offset..<min(wrong.count, offset + 10_000)])), from: teacher.session)
        offset += 10_000
    }
    teacher.upload(h, [0x00] + Array(photo.dropFirst()))
    h.deliver(.blobPut(hash: testHash(image(60_000, seed: 2)), size: 60_000, offset: 0, data: [0xFF]), from: teacher.session)
    teacher.run(h)
    #expect(teacher.errors == [.blobRefused, .blobRefused, .blobRefused, .blobRefused])
    #expect(blobs.blobs["r"]?[hash] == nil)
    viewer.upload(h, photo)
    #expect(viewer.errors == [.permissionDenied, .permissionDenied, .permissionDenied], "each part refused")

    // A background naming an image the room does not have, or with the wrong size.
    teacher.draw(h, [background(photo)])
    #expect(teacher.errors.last == .unknownBlob)
    teacher.upload(h, photo)
    let wrongSize = Command.background(PageBackground(page: .first, image: BackgroundImage(hash: hash, width: 41, height: 30)!))
    teacher.draw(h, [wrongSize])
    #expect(teacher.errors.last == .malformedBatch)
    teacher.draw(h, [background(photo)])
    #expect(teacher.errors.count == 6)
    #expect(h.appended.count == 1, "only the good background is in the log")
}

/// Uploads under way hold at most `maxUploadBytesHeld` over every session: a stalled upload
/// cannot hold more, and its bytes are freed when its session goes.
@Test func uploadsUnderWayAreBoundedOverAllSessions() {
    var limits = RelayLimits()
    limits.maxUploadBytesHeld = 25_000
    let h = Harness(limits: limits)
    let blobs = FakeBlobs()
    h.relay.blobs = blobs
    var a = Member(h, 1, user: "a", role: .teacher)
    var b = Member(h, 2, user: "b", role: .presenter)
    a.run(h)
    b.run(h)
    let big = image(40_000, seed: 5)
    // a stalls after 20 000 bytes; b's upload then passes the bound and is refused.
    for offset in stride(from: 0, to: 20_000, by: 10_000) {
        h.deliver(.blobPut(hash: testHash(big), size: 40_000, offset: UInt32(offset), data: Array(big[offset..<offset + 10_000])), from: a.session)
    }
    b.upload(h, image(12_000, seed: 6), part: 6000)
    #expect(b.errors == [.storageUnavailable])
    // a goes away: its bytes are freed, and b's upload goes through.
    h.relay.handleSessionClosed(a.session, now: h.now)
    h.drain()
    b.upload(h, image(12_000, seed: 6), part: 6000)
    #expect(b.stored == [testHash(image(12_000, seed: 6))])
}
