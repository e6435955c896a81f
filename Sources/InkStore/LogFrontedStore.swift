/// The `RoomLogStore` surface shared by the memory and SQLite stores. Both are a `LogFront`
/// over their own reader and commit pipe, so every call forwards to it; only opening,
/// committing and closing differ, and those live in the subclasses and their pipes.
public class LogFrontedStore: RoomLogStore {
    let front: LogFront

    init(front: LogFront) { self.front = front }

    public func rooms() -> [RoomInfo] { front.allRooms() }
    public func room(_ name: String) -> RoomInfo? { front.room(name) }
    public func createRoom(_ name: String, retention: Retention, nowMs: UInt64) throws(StoreError) -> RoomInfo {
        try front.createRoom(name, retention: retention, nowMs: nowMs)
    }
    public func append(_ batch: NewBatch) throws(StoreError) -> AppendOutcome { try front.append(batch) }
    public func pollDurable() -> [DurableMark] { front.pollDurable() }
    public func pollFailures() -> [StoreError] { front.pollFailures() }
    public func flush() throws(StoreError) { try front.flush() }
    public func find(room: String, origin: UInt64, originSeq: UInt64) throws(StoreError) -> UInt64? {
        try front.find(room: room, origin: origin, originSeq: originSeq)
    }
    public func readTail(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) throws(StoreError) -> TailPage {
        try front.readTail(room: room, after: after, maxRecords: maxRecords, maxBytes: maxBytes)
    }
    public func latestSnapshot(room: String) throws(StoreError) -> RoomSnapshot? { try front.latestSnapshot(room: room) }
    public func writeSnapshot(room: String, _ snapshot: RoomSnapshot) throws(StoreError) {
        try front.writeSnapshot(room: room, snapshot)
    }
    public func expireIdleRooms(nowMs: UInt64, sparing: (String) -> Bool) throws(StoreError) -> [String] {
        try front.expireIdleRooms(nowMs: nowMs, sparing: sparing)
    }
    public func deleteRoom(_ name: String) throws(StoreError) { try front.deleteRoom(name) }
    public func putBlob(room: String, _ blob: StoredBlob) throws(StoreError) -> Bool { try front.putBlob(room: room, blob) }
    public func hasBlob(room: String, hash: [UInt8]) -> Bool { front.hasBlob(room: room, hash: hash) }
    public func readBlob(room: String, hash: [UInt8]) throws(StoreError) -> [UInt8]? { try front.readBlob(room: room, hash: hash) }
    public var usage: StoreUsage { front.usage }
    /// The limits that may change while the store is open (a daemon's reload).
    public func applyLiveLimits(maxRoomHistoryBytes: Int, idleRoomExpiryMs: UInt64) {
        front.applyLiveLimits(maxRoomHistoryBytes: maxRoomHistoryBytes, idleRoomExpiryMs: idleRoomExpiryMs)
    }
    public func close() { front.close() }
}
