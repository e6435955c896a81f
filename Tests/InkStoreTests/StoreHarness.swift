import Foundation
@testable import InkStore

/// Which implementation a behavioural test runs against.
enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case memory, sqlite
    var description: String { rawValue }
}

/// Opens, closes and reopens one store of either kind over the same backing storage.
final class StoreHarness {
    let kind: StoreKind
    let directory: String
    let disk = MemoryRoomLogStore.Disk()
    var limits = StoreLimits()
    var retention = Retention.board
    var durability = Durability.batch
    var maxPageCount: Int?
    private(set) var store: RoomLogStore?

    init(_ kind: StoreKind, directory: String? = nil) {
        self.kind = kind
        self.directory = directory ?? makeTemporaryDirectory("inkstore")
    }

    deinit {
        store?.close()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var path: String { directory + "/" + SQLiteRoomLogStore.fileName }

    @discardableResult
    func open() throws -> RoomLogStore {
        store?.close()
        let opened: RoomLogStore
        switch kind {
        case .memory:
            opened = MemoryRoomLogStore(disk: disk, limits: limits, defaultRetention: retention)
        case .sqlite:
            var options = SQLiteRoomLogStore.Options()
            options.limits = limits
            options.defaultRetention = retention
            options.durability = durability
            options.maxPageCount = maxPageCount
            opened = try SQLiteRoomLogStore(path: path, options: options)
        }
        store = opened
        return opened
    }
}

func makeTemporaryDirectory(_ prefix: String) -> String {
    let path = NSTemporaryDirectory() + "\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Deterministic payload bytes for a batch, so a reader can check exactly what it got.
func testPayload(room: String, seq: UInt64, length: Int? = nil) -> [UInt8] {
    var state = seq &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(room.utf8.reduce(0) { $0 &* 31 &+ Int($1) } & 0xffff_ffff)
    let count = length ?? Int(8 + (state >> 7) % 120)
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

func batch(_ room: String, origin: UInt64 = 7, originSeq: UInt64, at ms: UInt64 = 1000, payload: [UInt8]? = nil) -> NewBatch {
    NewBatch(room: room, origin: origin, originSeq: originSeq, author: "member-\(origin)", receivedAtMs: ms,
             payload: payload ?? testPayload(room: room, seq: originSeq))
}

/// Reads a room's whole log after `after` page by page.
func readAll(_ store: RoomLogStore, _ room: String, after: UInt64 = 0, pageRecords: Int = 1000) throws -> [BatchRecord] {
    var records: [BatchRecord] = []
    var cursor = after
    while true {
        let page = try store.readTail(room: room, after: cursor, maxRecords: pageRecords, maxBytes: 1 << 20)
        records += page.records
        cursor = page.nextAfter
        if page.reachedEnd { return records }
    }
}
