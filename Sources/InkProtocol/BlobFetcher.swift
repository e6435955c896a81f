// The device side of blob sync (docs/protocol.md 6a): which background images the device
// needs, asking for each once the strokes are in, acknowledging chunks, resuming after a
// reconnect where it stopped, and checking the whole blob against its hash.
import InkCodec

struct BlobFetcher: Sendable {
    /// Largest blob kept while it arrives (a daemon's own limit is lower).
    static let maxBlobBytes = Int(SessionMessageCodec.maxBlobBytes)
    /// Images kept once complete, in bytes: the oldest are dropped past it (they are fetched
    /// again if a page shows them again).
    static let maxKeptBytes = 256 * 1024 * 1024

    private struct Assembly: Sendable {
        var size: UInt32
        var count: UInt32
        var bytes: [UInt8]
        var nextIndex: UInt32 = 0
    }

    let hashBlob: @Sendable ([UInt8]) -> [UInt8]
    /// Complete, checked blobs, oldest first.
    private(set) var complete: [(hash: BlobHash, bytes: [UInt8])] = []
    private var arriving: [BlobHash: Assembly] = [:]
    /// Named by the board, not yet complete, in the order they were named.
    private var wanted: [BlobHash] = []
    /// Asked for on the current session.
    private var asked: Set<BlobHash> = []
    /// Failed their hash check this many times (asked again up to `maxAttempts`).
    private var failures: [BlobHash: Int] = [:]
    static let maxAttempts = 3

    init(hashBlob: @escaping @Sendable ([UInt8]) -> [UInt8]) { self.hashBlob = hashBlob }

    func blob(_ hash: BlobHash) -> [UInt8]? { complete.last { $0.hash == hash }?.bytes }

    /// A new session: nothing is asked for on it yet.
    mutating func sessionStarted() { asked = [] }

    /// The board names `hash` (a background command was folded).
    mutating func want(_ hash: BlobHash) {
        guard blob(hash) == nil, !wanted.contains(hash), (failures[hash] ?? 0) < BlobFetcher.maxAttempts else { return }
        wanted.append(hash)
    }

    /// Requests for every wanted blob not yet asked for on this session, resuming partial ones.
    mutating func requests() -> [ClientMessage] {
        var out: [ClientMessage] = []
        for hash in wanted where !asked.contains(hash) {
            asked.insert(hash)
            out.append(.blobRequest(hash: hash, firstChunk: arriving[hash]?.nextIndex ?? 0))
        }
        return out
    }

    /// A chunk: its acknowledgement to send, and the checked blob once it is complete.
    mutating func handleChunk(hash: BlobHash, size: UInt32, index: UInt32, count: UInt32, data: [UInt8],
                              _ events: inout [RoomFollowerEvent]) {
        guard wanted.contains(hash), Int(size) <= BlobFetcher.maxBlobBytes else { return }
        var a = arriving[hash] ?? Assembly(size: size, count: count, bytes: [])
        if a.size != size || a.count != count {
            a = Assembly(size: size, count: count, bytes: [])
        }
        // In order on one session; a chunk already held (a resend after a resume) is acked again.
        if index < a.nextIndex {
            events.append(.reply(.blobAck(hash: hash, chunk: index)))
            return
        }
        guard index == a.nextIndex, a.bytes.count + data.count <= Int(size) else { return }
        if a.bytes.isEmpty { a.bytes.reserveCapacity(Int(size)) }
        arriving[hash] = nil  // no second copy while appending
        a.bytes += data
        a.nextIndex += 1
        events.append(.reply(.blobAck(hash: hash, chunk: index)))
        guard a.nextIndex == a.count else {
            arriving[hash] = a
            return
        }
        wanted.removeAll { $0 == hash }
        asked.remove(hash)
        guard a.bytes.count == Int(size), hashBlob(a.bytes) == hash.bytes else {
            failures[hash, default: 0] += 1
            events.append(.blobFailed(hash: hash, reason: "the image's bytes do not match its hash"))
            want(hash)
            events += requests().map { .reply($0) }
            return
        }
        keep(hash, a.bytes)
        events.append(.blob(hash: hash, bytes: a.bytes))
    }

    mutating func handleMissing(_ hash: BlobHash, _ events: inout [RoomFollowerEvent]) {
        wanted.removeAll { $0 == hash }
        arriving[hash] = nil
        events.append(.blobFailed(hash: hash, reason: "the room has no such image"))
    }

    private mutating func keep(_ hash: BlobHash, _ bytes: [UInt8]) {
        complete.append((hash, bytes))
        var total = complete.reduce(0) { $0 + $1.bytes.count }
        while total > BlobFetcher.maxKeptBytes, complete.count > 1 { total -= complete.removeFirst().bytes.count }
    }
}
