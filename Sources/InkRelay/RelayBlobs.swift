// Background images: members upload blobs in parts and fetch them in acknowledged chunks
// (docs/protocol.md 6a). The relay checks order, bounds and the room's batches; storing,
// hashing and decoding are the daemon's (`RoomBlobs`).
import InkCodec
import InkProtocol

/// A checked image's size in pixels.
public struct ImageSize: Hashable, Sendable {
    public var width: UInt32
    public var height: UInt32
    public init(width: UInt32, height: UInt32) {
        self.width = width
        self.height = height
    }
}

/// Where the relay's blobs live: the daemon's store, its hash and its image decoder.
public protocol RoomBlobs: AnyObject {
    /// The pixel size of the room's image `hash`, nil when the room has no such blob.
    func imageSize(room: String, hash: BlobHash) -> ImageSize?
    func readBlob(room: String, hash: BlobHash) -> [UInt8]?
    /// Checks a complete upload (its SHA-256 is `hash`, it is a decodable JPEG or PNG within
    /// the bounds) and stores it in the room: its size, or the refusal's text.
    func storeImage(room: String, hash: BlobHash, bytes: [UInt8], now: Instant) -> Result<ImageSize, BlobRefusal>
}

public struct BlobRefusal: Error, Hashable, Sendable {
    public var code: SessionErrorCode
    public var text: String
    public init(_ code: SessionErrorCode, _ text: String) {
        self.code = code
        self.text = text
    }

    public init(_ text: String) { self.init(.blobRefused, text) }
}

struct BlobUpload {
    let hash: BlobHash
    let size: UInt32
    var bytes: [UInt8]
}

struct BlobFetch {
    let hash: BlobHash
    let bytes: [UInt8]
    let count: UInt32
    var nextChunk: UInt32
    /// Chunks acknowledged: every index below this one.
    var ackedBelow: UInt32
}

extension Relay {
    func handleBlobPut(hash: BlobHash, size: UInt32, offset: UInt32, data: [UInt8], from session: SessionID, now: Instant) {
        guard let m = sessions[session]?.member else {
            refuse(session, .notJoined, originSeq: 0, text: "join a room first")
            return
        }
        guard m.role.canDraw else {
            refuse(session, .permissionDenied, originSeq: 0, text: "viewers may not upload images")
            return
        }
        guard let blobs else {
            refuse(session, .blobRefused, originSeq: 0, text: "this daemon stores no images")
            return
        }
        if offset == 0 {
            dropUpload(m)
            if let known = blobs.imageSize(room: m.room, hash: hash) {
                send(session, .blobStored(hash: hash, width: known.width, height: known.height))
                return
            }
            guard Int(size) <= limits.maxBlobBytes else {
                refuse(session, .blobRefused, originSeq: 0, text: "image of \(size) bytes exceeds \(limits.maxBlobBytes)")
                return
            }
            m.upload = BlobUpload(hash: hash, size: size, bytes: [])
        }
        guard var upload = m.upload else {
            // The rest of an upload already answered (known blob) or refused: ignored.
            return
        }
        guard upload.hash == hash, upload.size == size, Int(offset) == upload.bytes.count else {
            dropUpload(m)
            refuse(session, .blobRefused, originSeq: 0, text: "image parts out of order (offset \(offset), have \(upload.bytes.count))")
            return
        }
        guard uploadBytesHeld + data.count <= limits.maxUploadBytesHeld else {
            dropUpload(m)
            refuse(session, .storageUnavailable, originSeq: 0, text: "too many image uploads under way: send it again later")
            return
        }
        m.upload = nil  // no second copy while appending
        upload.bytes += data
        uploadBytesHeld += data.count
        guard upload.bytes.count == Int(upload.size) else {
            m.upload = upload
            return
        }
        uploadBytesHeld -= upload.bytes.count
        switch blobs.storeImage(room: m.room, hash: hash, bytes: upload.bytes, now: now) {
        case .success(let size):
            event(.blobStored(room: m.room, hash: hash, bytes: upload.bytes.count))
            send(session, .blobStored(hash: hash, width: size.width, height: size.height))
        case .failure(let refusal):
            event(.blobRefused(room: m.room, session: session, text: refusal.text))
            refuse(session, refusal.code, originSeq: 0, text: refusal.text)
        }
    }

    /// Forgets the member's upload under way, if any.
    func dropUpload(_ m: MemberState) {
        if let upload = m.upload { uploadBytesHeld -= upload.bytes.count }
        m.upload = nil
    }

    func handleBlobRequest(hash: BlobHash, firstChunk: UInt32, from session: SessionID) {
        guard let m = sessions[session]?.member else {
            refuse(session, .notJoined, originSeq: 0, text: "join a room first")
            return
        }
        if let i = m.fetches.firstIndex(where: { $0.hash == hash }) {
            // Asked again (a resumed fetch): restart it from where the device says.
            if firstChunk < m.fetches[i].count {
                m.fetches[i].nextChunk = firstChunk
                m.fetches[i].ackedBelow = firstChunk
            }
            pumpBlobs(session, m)
            return
        }
        guard m.fetches.count < limits.maxBlobFetchesPerMember else {
            refuse(session, .other, originSeq: 0, text: "more than \(limits.maxBlobFetchesPerMember) images requested at once")
            return
        }
        guard let bytes = cachedBlob(room: m.room, hash: hash), !bytes.isEmpty else {
            send(session, .blobMissing(hash: hash))
            return
        }
        let count = UInt32((bytes.count + limits.blobChunkBytes - 1) / limits.blobChunkBytes)
        let first = firstChunk < count ? firstChunk : 0
        m.fetches.append(BlobFetch(hash: hash, bytes: bytes, count: count, nextChunk: first, ackedBelow: first))
        pumpBlobs(session, m)
    }

    func handleBlobAck(hash: BlobHash, chunk: UInt32, from session: SessionID) {
        guard let m = sessions[session]?.member, let i = m.fetches.firstIndex(where: { $0.hash == hash }) else { return }
        let fetch = m.fetches[i]
        guard chunk < fetch.nextChunk else { return }  // acks what was never sent: ignored
        m.fetches[i].ackedBelow = max(fetch.ackedBelow, chunk + 1)
        if m.fetches[i].ackedBelow >= fetch.count {
            m.fetches.remove(at: i)
            event(.blobSent(room: m.room, session: session, bytes: fetch.bytes.count))
        }
        pumpBlobs(session, m)
    }

    /// Sends blob chunks within the window, only to a live member whose transport takes more:
    /// a late joiner's strokes (its sync) and live batches go first, the background fills in.
    func pumpBlobs(_ session: SessionID, _ m: MemberState) {
        guard !m.blocked, case .live = m.mode, !m.fetches.isEmpty else { return }
        var fetch = m.fetches[0]
        let chunkBytes = limits.blobChunkBytes
        while fetch.nextChunk < fetch.count, fetch.nextChunk - fetch.ackedBelow < limits.blobChunksInFlight, !m.blocked {
            let start = Int(fetch.nextChunk) * chunkBytes
            let end = min(fetch.bytes.count, start + chunkBytes)
            send(session, .blobChunk(hash: fetch.hash, size: UInt32(fetch.bytes.count), index: fetch.nextChunk, count: fetch.count,
                                     data: Array(fetch.bytes[start..<end])))
            fetch.nextChunk += 1
        }
        m.fetches[0] = fetch
    }

    /// The room's blob, from the relay's cache or the daemon's store (then cached).
    func cachedBlob(room: String, hash: BlobHash) -> [UInt8]? {
        let key = BlobKey(room: room, hash: hash)
        if let i = blobCache.firstIndex(where: { $0.key == key }) {
            let entry = blobCache.remove(at: i)
            blobCache.append(entry)
            return entry.bytes
        }
        guard let bytes = blobs?.readBlob(room: room, hash: hash) else { return nil }
        guard bytes.count <= limits.blobCacheBytes else { return bytes }
        var total = blobCache.reduce(0) { $0 + $1.bytes.count } + bytes.count
        while total > limits.blobCacheBytes, !blobCache.isEmpty { total -= blobCache.removeFirst().bytes.count }
        blobCache.append((key, bytes))
        return bytes
    }

    /// Why a batch may not be appended for its backgrounds: an image the room does not have.
    func blobRefusal(_ batch: Batch, room: String) -> (SessionErrorCode, String)? {
        for timed in batch.commands {
            guard case .background(let background) = timed.command, let image = background.image else { continue }
            guard let size = blobs?.imageSize(room: room, hash: image.hash) else {
                return (.unknownBlob, "the room has no image \(image.hash.hex): upload it first")
            }
            guard size == ImageSize(width: image.width, height: image.height) else {
                return (.malformedBatch, "image \(image.hash.hex) is \(size.width)x\(size.height), not \(image.width)x\(image.height)")
            }
        }
        return nil
    }
}

struct BlobKey: Hashable {
    var room: String
    var hash: BlobHash
}
