/// A `RoomLogStore` in memory, for relay and daemon tests. It shares its caller-side logic with
/// `SQLiteRoomLogStore`, so both answer the same way; a `Disk` outlives the store object, so a
/// test can reopen (restart) or drop what was not durable (crash).
public final class MemoryRoomLogStore: LogFrontedStore {
    /// What survives a restart: the committed rooms.
    public final class Disk {
        struct Room {
            var name: String
            var createdAtMs: UInt64
            var lastActivityMs: UInt64
            var retention: Retention
            /// Ascending and consecutive.
            var batches: [BatchRecord] = []
            var bytes = 0
            var origins: [UInt64: [UInt64: UInt64]] = [:]
            /// Per origin, the highest originSeq compaction deleted.
            var compactedOrigins: [UInt64: UInt64] = [:]
            var snapshot: RoomSnapshot?
            var blobs: [[UInt8]: StoredBlob] = [:]
        }

        var rooms: [Int64: Room] = [:]
        var usedBytes = 0
        /// Commits that would take the stored payload bytes past this fail like a full disk.
        public var capacityBytes: Int?

        public init(capacityBytes: Int? = nil) { self.capacityBytes = capacityBytes }

        /// Commits `ops` all or nothing.
        func apply(_ ops: [StoreOp]) throws(StoreError) {
            if let capacity = capacityBytes {
                let grown = ops.reduce(0) { total, op in
                    switch op {
                    case .append(_, let record): total + record.payload.count
                    case .snapshot(_, let snapshot, _): total + snapshot.payload.count
                    case .putBlob(_, let blob): total + blob.bytes.count
                    default: total
                    }
                }
                if grown > 0 && usedBytes + grown > capacity {
                    throw .storage(code: StoreError.sqliteFull, message: "database or disk is full", context: "memory commit")
                }
            }
            for op in ops { apply(op) }
        }

        private func apply(_ op: StoreOp) {
            switch op {
            case let .createRoom(id, name, createdAtMs, retention):
                rooms[id] = Room(name: name, createdAtMs: createdAtMs, lastActivityMs: createdAtMs, retention: retention)
            case let .append(id, record):
                guard var room = rooms.removeValue(forKey: id) else { return }
                room.batches.append(record)
                room.bytes += record.payload.count
                usedBytes += record.payload.count
                room.origins[record.origin, default: [:]][record.originSeq] = record.roomSeq
                room.lastActivityMs = max(room.lastActivityMs, record.receivedAtMs)
                rooms[id] = room
            case let .snapshot(id, snapshot, compact):
                guard var room = rooms.removeValue(forKey: id) else { return }
                usedBytes += snapshot.payload.count - (room.snapshot?.payload.count ?? 0)
                room.snapshot = snapshot
                if compact {
                    let covered = room.batches.prefix { $0.roomSeq <= snapshot.uptoRoomSeq }
                    for record in covered {
                        room.bytes -= record.payload.count
                        usedBytes -= record.payload.count
                        room.origins[record.origin]?[record.originSeq] = nil
                        room.compactedOrigins[record.origin] = max(room.compactedOrigins[record.origin] ?? 0, record.originSeq)
                    }
                    room.batches.removeFirst(covered.count)
                }
                rooms[id] = room
            case let .putBlob(id, blob):
                guard rooms[id] != nil, rooms[id]!.blobs[blob.hash] == nil else { return }
                rooms[id]!.blobs[blob.hash] = blob
                usedBytes += blob.bytes.count
            case let .deleteRoom(id):
                guard let room = rooms.removeValue(forKey: id) else { return }
                usedBytes -= room.bytes + (room.snapshot?.payload.count ?? 0) + room.blobs.values.reduce(0) { $0 + $1.bytes.count }
            }
        }
    }

    private let pipe: MemoryPipe

    /// - Parameter holdDurability: when true, writes become durable only at `flush()` (or
    ///   `commitHeld()`), so a test can check that nothing is acknowledged before that.
    public init(disk: Disk = Disk(), limits: StoreLimits = StoreLimits(), defaultRetention: Retention = .board, holdDurability: Bool = false) {
        let pipe = MemoryPipe(disk: disk, hold: holdDurability)
        self.pipe = pipe
        // Loading from memory cannot fail.
        super.init(front: try! LogFront(reader: MemoryReader(disk: disk), pipe: pipe, limits: limits, defaultRetention: defaultRetention))
    }

    /// Commits the writes held back by `holdDurability` without waiting for `flush`.
    public func commitHeld() { pipe.commitQueued() }

}

/// Commits inline, on the caller's thread.
final class MemoryPipe: CommitPipe {
    private let disk: MemoryRoomLogStore.Disk
    private let hold: Bool
    private var queue: [StoreOp] = []
    private var report = PipeReport()
    private var lastFailure: StoreError?

    init(disk: MemoryRoomLogStore.Disk, hold: Bool) {
        self.disk = disk
        self.hold = hold
    }

    func submit(_ op: StoreOp) {
        queue.append(op)
        if !hold { commitQueued() }
    }

    /// Commits everything queued as one group; on failure keeps it queued for the next try.
    @discardableResult
    func commitQueued() -> Bool {
        guard !queue.isEmpty else { return true }
        do {
            try disk.apply(queue)
        } catch {
            report.failures.append(error)
            lastFailure = error
            return false
        }
        report.committed += queue
        report.commits += 1
        queue = []
        return true
    }

    func drain() -> PipeReport {
        if !hold && !queue.isEmpty { commitQueued() }
        defer { report = PipeReport() }
        return report
    }

    func flush() throws(StoreError) {
        if !commitQueued(), let lastFailure { throw lastFailure }
    }

    func close() { commitQueued() }
}

/// Reads a `Disk`.
final class MemoryReader: LogReader {
    private let disk: MemoryRoomLogStore.Disk

    init(disk: MemoryRoomLogStore.Disk) { self.disk = disk }

    func loadRooms() throws(StoreError) -> [LoadedRoom] {
        disk.rooms.map { id, room in
            LoadedRoom(
                id: id, name: room.name, createdAtMs: room.createdAtMs, lastActivityMs: room.lastActivityMs,
                retention: room.retention, recordCount: room.batches.count, historyBytes: room.bytes,
                minRoomSeq: room.batches.first?.roomSeq ?? 0, maxRoomSeq: room.batches.last?.roomSeq ?? 0,
                snapshotUpto: room.snapshot?.uptoRoomSeq ?? 0)
        }
    }

    func loadOriginHighWater() throws(StoreError) -> [(roomId: Int64, origin: UInt64, originSeq: UInt64)] {
        disk.rooms.sorted { $0.key < $1.key }.flatMap { id, room in
            let stored = room.origins.compactMap { origin, seqs in seqs.keys.max().map { (origin, $0) } }
            let compacted = room.compactedOrigins.map { ($0.key, $0.value) }
            return (stored + compacted).sorted { $0 < $1 }.map { (roomId: id, origin: $0.0, originSeq: $0.1) }
        }
    }

    func find(roomId: Int64, origin: UInt64, originSeq: UInt64) throws(StoreError) -> UInt64? {
        guard let room = disk.rooms[roomId] else { return nil }
        if let seq = room.origins[origin]?[originSeq] { return seq }
        if let compacted = room.compactedOrigins[origin], originSeq <= compacted { return 0 }
        return nil
    }

    func read(roomId: Int64, after: UInt64, maxRecords: Int, maxBytes: Int) throws(StoreError) -> [BatchRecord] {
        guard let room = disk.rooms[roomId], let first = room.batches.first?.roomSeq else { return [] }
        var index = after + 1 > first ? Int(after + 1 - first) : 0
        var records: [BatchRecord] = []
        var bytes = 0
        while index < room.batches.count, records.count < maxRecords {
            let record = room.batches[index]
            guard records.isEmpty || bytes + record.payload.count <= maxBytes else { break }
            records.append(record)
            bytes += record.payload.count
            index += 1
        }
        return records
    }

    func loadBlobs() throws(StoreError) -> [(roomId: Int64, hash: [UInt8], size: Int)] {
        disk.rooms.keys.sorted().flatMap { id in
            disk.rooms[id]!.blobs.values.sorted { $0.hash.lexicographicallyPrecedes($1.hash) }.map { (id, $0.hash, $0.bytes.count) }
        }
    }

    func blob(roomId: Int64, hash: [UInt8]) throws(StoreError) -> [UInt8]? { disk.rooms[roomId]?.blobs[hash]?.bytes }

    func snapshot(roomId: Int64) throws(StoreError) -> RoomSnapshot? { disk.rooms[roomId]?.snapshot }

    func usage(roomId: Int64, from: UInt64, upto: UInt64) throws(StoreError) -> (count: Int, bytes: Int, maxSeq: UInt64) {
        guard let room = disk.rooms[roomId] else { return (0, 0, 0) }
        let range = room.batches.filter { $0.roomSeq >= from && $0.roomSeq <= upto }
        return (range.count, range.reduce(0) { $0 + $1.payload.count }, range.last?.roomSeq ?? 0)
    }
}
