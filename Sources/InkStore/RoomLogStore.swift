/// The durable room log, as the daemon and the relay's tests see it.
///
/// One thread (the daemon's loop) calls every method. Call order:
/// - on start, `rooms()` lists every room exactly where it was (last and durable `roomSeq`,
///   snapshot, sizes);
/// - `append` returns at once with the batch's `roomSeq`; the batch becomes durable later;
/// - after the wake-up (`SQLiteRoomLogStore.onDurable`) or on a timer, `pollDurable` says how far
///   each room is durable: acknowledge a batch to its author only then;
/// - `pollFailures` hands over storage failures (full disk, I/O error) for logging; the store
///   keeps the failed writes and retries them, and refuses new appends only when its backlog
///   bound is reached, so the live relay goes on;
/// - history sync reads `latestSnapshot` then `readTail` pages.
public protocol RoomLogStore: AnyObject {
    /// Every room, sorted by name.
    func rooms() -> [RoomInfo]
    func room(_ name: String) -> RoomInfo?

    /// Creates an empty room; `append` creates missing rooms with the default retention.
    func createRoom(_ name: String, retention: Retention, nowMs: UInt64) throws(StoreError) -> RoomInfo

    /// Appends a batch at the room's next sequence number, or recognises it by
    /// `(origin, originSeq)` and returns where it already is.
    func append(_ batch: NewBatch) throws(StoreError) -> AppendOutcome

    /// The `(room, roomSeq)` high-water marks that became durable since the last call, by room name.
    func pollDurable() -> [DurableMark]

    /// Storage failures since the last call, oldest first.
    func pollFailures() -> [StoreError]

    /// Blocks until everything appended so far is durable; throws the failure if a commit fails.
    func flush() throws(StoreError)

    /// Where `(origin, originSeq)` sits in the room, if it is there.
    func find(room: String, origin: UInt64, originSeq: UInt64) throws(StoreError) -> UInt64?

    /// Batches after `after`, ascending, at most `maxRecords` (capped by `StoreLimits.maxPageRecords`)
    /// and about `maxBytes` of payload (a page holds at least one batch when one exists).
    /// Includes batches not yet durable. Throws `historyCompacted` when `after` precedes the log.
    func readTail(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) throws(StoreError) -> TailPage

    /// The latest snapshot (durable or not yet), if any.
    func latestSnapshot(room: String) throws(StoreError) -> RoomSnapshot?

    /// Stores a snapshot that replaces older ones; with `Retention.board` the batches it covers
    /// are deleted in the same transaction.
    func writeSnapshot(room: String, _ snapshot: RoomSnapshot) throws(StoreError)

    /// Deletes rooms idle for `StoreLimits.idleRoomExpiryMs` with nothing pending, except those
    /// `sparing` names (the daemon spares rooms with members); returns their names, sorted.
    func expireIdleRooms(nowMs: UInt64, sparing: (String) -> Bool) throws(StoreError) -> [String]

    /// Deletes a room and its history.
    func deleteRoom(_ name: String) throws(StoreError)

    /// Stores a content-addressed blob (a background image) once per room (false: the room
    /// has it already). Bounded by `StoreLimits.maxBlobBytes` and the room's quota
    /// `maxRoomBlobBytes`. Writes are ordered: a batch appended after this call is durable
    /// only once the blob is, so a batch naming a blob is never acknowledged without it.
    func putBlob(room: String, _ blob: StoredBlob) throws(StoreError) -> Bool
    func hasBlob(room: String, hash: [UInt8]) -> Bool
    /// The blob's bytes, durable or not yet; nil when the room has none of that hash.
    func readBlob(room: String, hash: [UInt8]) throws(StoreError) -> [UInt8]?

    var usage: StoreUsage { get }

    /// Flushes what it can and releases the storage; later calls throw `closed`.
    func close()
}

extension RoomLogStore {
    /// Deletes every room idle for `StoreLimits.idleRoomExpiryMs` with nothing pending.
    public func expireIdleRooms(nowMs: UInt64) throws(StoreError) -> [String] {
        try expireIdleRooms(nowMs: nowMs, sparing: { _ in false })
    }
}
