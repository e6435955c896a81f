/// The caller-side half of a store, shared by the memory and SQLite stores so both behave the
/// same: it validates, assigns room sequence numbers, recognises duplicates, enforces limits,
/// keeps what is not yet durable (so reads see it), and turns commit reports into durable marks.
/// Writes go in order to a `CommitPipe`; committed data is read through a `LogReader`.
final class LogFront {
    private struct OriginKey: Hashable {
        var origin: UInt64
        var originSeq: UInt64
    }

    private struct Room {
        var id: Int64
        var info: RoomInfo
        /// Appended, not yet reported durable; ascending and consecutive.
        var pending = PendingRecords()
        var pendingOrigins: [OriginKey: UInt64] = [:]
        /// Written, not yet reported durable.
        var pendingSnapshot: RoomSnapshot?
        /// Writes of any kind for this room not yet durable (an idle room expires only at 0).
        var pendingOps = 0
        /// Highest originSeq per origin ever appended; an append above it is new for sure.
        var originHighWater: [UInt64: UInt64] = [:]
        /// False once an origin could not be tracked: unknown origins then need a lookup.
        var everyOriginTracked = true
        /// Every blob's size by hash, durable or not yet.
        var blobSizes: [[UInt8]: Int] = [:]
        /// Blobs stored, not yet reported durable (reads see them).
        var pendingBlobs: [[UInt8]: StoredBlob] = [:]
    }

    /// The history limit and idle expiry change on reload (`applyLiveLimits`); the rest is fixed.
    private(set) var limits: StoreLimits
    let defaultRetention: Retention
    private let reader: LogReader
    private let pipe: CommitPipe
    private var rooms: [String: Room] = [:]
    private var namesById: [Int64: String] = [:]
    private var nextRoomId: Int64 = 1
    private var pendingOps = 0
    private var pendingBytes = 0
    private var lastFailure: String?
    private var unreportedMarks: [String: UInt64] = [:]
    private var unreportedFailures: [StoreError] = []
    private var counters = StoreUsage()
    private var closed = false

    /// Takes a new history limit and idle expiry: they are checked per append and per expiry
    /// sweep, so a change applies from the next one (a room already past a lowered limit keeps
    /// what it has and takes nothing more).
    func applyLiveLimits(maxRoomHistoryBytes: Int, idleRoomExpiryMs: UInt64) {
        limits.maxRoomHistoryBytes = maxRoomHistoryBytes
        limits.idleRoomExpiryMs = idleRoomExpiryMs
    }

    init(reader: LogReader, pipe: CommitPipe, limits: StoreLimits, defaultRetention: Retention) throws(StoreError) {
        self.reader = reader
        self.pipe = pipe
        self.limits = limits
        self.defaultRetention = defaultRetention
        for loaded in try reader.loadRooms() {
            let last = max(loaded.maxRoomSeq, loaded.snapshotUpto)
            let info = RoomInfo(
                name: loaded.name, createdAtMs: loaded.createdAtMs, lastActivityMs: loaded.lastActivityMs,
                retention: loaded.retention, lastRoomSeq: last, durableRoomSeq: last,
                firstRoomSeq: loaded.recordCount > 0 ? loaded.minRoomSeq : last + 1,
                snapshotUptoRoomSeq: loaded.snapshotUpto, recordCount: loaded.recordCount, historyBytes: loaded.historyBytes)
            rooms[loaded.name] = Room(id: loaded.id, info: info)
            namesById[loaded.id] = loaded.name
            nextRoomId = max(nextRoomId, loaded.id + 1)
        }
        for entry in try reader.loadBlobs() {
            guard let name = namesById[entry.roomId] else { continue }
            modifyRoom(name) { room in
                room.blobSizes[entry.hash] = entry.size
                room.info.blobCount += 1
                room.info.blobBytes += entry.size
            }
        }
        for entry in try reader.loadOriginHighWater() {
            guard let name = namesById[entry.roomId], var room = rooms[name] else { continue }
            track(origin: entry.origin, originSeq: entry.originSeq, in: &room)
            rooms[name] = room
        }
    }

    private func track(origin: UInt64, originSeq: UInt64, in room: inout Room) {
        if let known = room.originHighWater[origin] {
            room.originHighWater[origin] = max(known, originSeq)
        } else if room.originHighWater.count < limits.maxTrackedOriginsPerRoom {
            room.originHighWater[origin] = originSeq
        } else {
            room.everyOriginTracked = false
        }
    }

    // MARK: Rooms

    func allRooms() -> [RoomInfo] {
        rooms.values.map(\.info).sorted { $0.name < $1.name }
    }

    func room(_ name: String) -> RoomInfo? { rooms[name]?.info }

    func createRoom(_ name: String, retention: Retention, nowMs: UInt64) throws(StoreError) -> RoomInfo {
        try checkOpen()
        guard rooms[name] == nil else { throw .roomExists(name) }
        try checkRoomName(name)
        try checkBacklog(ops: 1, bytes: name.utf8.count)
        return makeRoom(name, retention: retention, nowMs: nowMs).info
    }

    /// Mutates a room in place (a copy out of the dictionary would copy its pending batches).
    @discardableResult
    private func modifyRoom<T>(_ name: String, _ body: (inout Room) -> T) -> T {
        body(&rooms[name]!)
    }

    @discardableResult
    private func makeRoom(_ name: String, retention: Retention, nowMs: UInt64) -> Room {
        let id = nextRoomId
        nextRoomId += 1
        let info = RoomInfo(
            name: name, createdAtMs: nowMs, lastActivityMs: nowMs, retention: retention, lastRoomSeq: 0,
            durableRoomSeq: 0, firstRoomSeq: 1, snapshotUptoRoomSeq: 0, recordCount: 0, historyBytes: 0)
        var room = Room(id: id, info: info)
        room.pendingOps = 1
        rooms[name] = room
        namesById[id] = name
        enqueue(.createRoom(id: id, name: name, createdAtMs: nowMs, retention: retention))
        return room
    }

    func deleteRoom(_ name: String) throws(StoreError) {
        try checkOpen()
        guard let room = rooms.removeValue(forKey: name) else { throw .roomNotFound(name) }
        namesById[room.id] = nil
        unreportedMarks[name] = nil
        enqueue(.deleteRoom(roomId: room.id))
    }

    func expireIdleRooms(nowMs: UInt64, sparing: (String) -> Bool) throws(StoreError) -> [String] {
        try checkOpen()
        absorb()
        guard limits.idleRoomExpiryMs > 0 else { return [] }
        let idle = rooms.values.filter { room in
            room.pendingOps == 0 && nowMs >= room.info.lastActivityMs && nowMs - room.info.lastActivityMs >= limits.idleRoomExpiryMs
                && !sparing(room.info.name)
        }.map(\.info.name).sorted()
        for name in idle { try deleteRoom(name) }
        counters.expiredRooms += UInt64(idle.count)
        return idle
    }

    // MARK: Appending

    func append(_ batch: NewBatch) throws(StoreError) -> AppendOutcome {
        try checkOpen()
        try checkRoomName(batch.room)
        let authorBytes = batch.author.utf8.count
        guard authorBytes <= StoreLimits.maxAuthorBytes else { throw .authorTooLong(bytes: authorBytes) }
        guard batch.payload.count <= limits.maxPayloadBytes else {
            throw .payloadTooLarge(bytes: batch.payload.count, limit: limits.maxPayloadBytes)
        }
        guard batch.originSeq <= StoreLimits.maxRoomSeq else { throw .originSeqTooLarge(batch.originSeq) }
        if let existing = try find(room: batch.room, origin: batch.origin, originSeq: batch.originSeq) {
            counters.duplicates += 1
            return .duplicate(roomSeq: existing)
        }
        let weight = batch.payload.count + authorBytes
        let existing = rooms[batch.room]?.info
        if existing == nil {
            guard rooms.count < limits.maxRooms else { throw .tooManyRooms(limit: limits.maxRooms) }
            try checkBacklog(ops: 2, bytes: weight + batch.room.utf8.count)
        } else {
            try checkBacklog(ops: 1, bytes: weight)
        }
        let last = existing?.lastRoomSeq ?? 0
        guard last < StoreLimits.maxRoomSeq else { throw .roomSeqExhausted(room: batch.room) }
        if let expected = batch.expectedRoomSeq, expected != last + 1 {
            throw .roomSeqMismatch(room: batch.room, next: last + 1, expected: expected)
        }
        let history = (existing?.historyBytes ?? 0) + batch.payload.count
        guard history <= limits.maxRoomHistoryBytes else {
            throw .roomHistoryFull(room: batch.room, bytes: history, limit: limits.maxRoomHistoryBytes)
        }
        if existing == nil { makeRoom(batch.room, retention: defaultRetention, nowMs: batch.receivedAtMs) }
        let record = BatchRecord(
            roomSeq: last + 1, origin: batch.origin, originSeq: batch.originSeq,
            author: batch.author, receivedAtMs: batch.receivedAtMs, payload: batch.payload)
        let roomId = modifyRoom(batch.room) { room in
            room.pending.append(record)
            room.pendingOrigins[OriginKey(origin: batch.origin, originSeq: batch.originSeq)] = record.roomSeq
            track(origin: batch.origin, originSeq: batch.originSeq, in: &room)
            room.pendingOps += 1
            room.info.lastRoomSeq = record.roomSeq
            room.info.recordCount += 1
            room.info.historyBytes = history
            room.info.lastActivityMs = max(room.info.lastActivityMs, batch.receivedAtMs)
            return room.id
        }
        counters.appends += 1
        enqueue(.append(roomId: roomId, record: record))
        return .appended(roomSeq: record.roomSeq)
    }

    // MARK: Blobs

    /// Stores `blob` in `room` (created if missing) unless the room has a blob of that hash:
    /// false then, and nothing is written. Durable with the next commit, before any batch
    /// appended after this call.
    func putBlob(room name: String, _ blob: StoredBlob) throws(StoreError) -> Bool {
        try checkOpen()
        try checkRoomName(name)
        guard (1...StoreLimits.maxBlobHashBytes).contains(blob.hash.count) else { throw .invalidBlobHash(bytes: blob.hash.count) }
        guard (1...limits.maxBlobBytes).contains(blob.bytes.count) else {
            throw .blobTooLarge(bytes: blob.bytes.count, limit: limits.maxBlobBytes)
        }
        if rooms[name]?.blobSizes[blob.hash] != nil { return false }
        let weight = blob.hash.count + blob.bytes.count
        let existing = rooms[name]?.info
        if existing == nil {
            guard rooms.count < limits.maxRooms else { throw .tooManyRooms(limit: limits.maxRooms) }
            try checkBacklog(ops: 2, bytes: weight + name.utf8.count)
        } else {
            try checkBacklog(ops: 1, bytes: weight)
        }
        let total = (existing?.blobBytes ?? 0) + blob.bytes.count
        guard total <= limits.maxRoomBlobBytes else {
            throw .roomBlobQuotaFull(room: name, bytes: total, limit: limits.maxRoomBlobBytes)
        }
        if existing == nil { makeRoom(name, retention: defaultRetention, nowMs: blob.createdAtMs) }
        let roomId = modifyRoom(name) { room in
            room.blobSizes[blob.hash] = blob.bytes.count
            room.pendingBlobs[blob.hash] = blob
            room.pendingOps += 1
            room.info.blobCount += 1
            room.info.blobBytes = total
            return room.id
        }
        enqueue(.putBlob(roomId: roomId, blob: blob))
        return true
    }

    func hasBlob(room name: String, hash: [UInt8]) -> Bool { rooms[name]?.blobSizes[hash] != nil }

    /// The blob's bytes (durable or not yet), nil when the room has none of that hash.
    func readBlob(room name: String, hash: [UInt8]) throws(StoreError) -> [UInt8]? {
        try checkOpen()
        guard let room = rooms[name], room.blobSizes[hash] != nil else { return nil }
        if let pending = room.pendingBlobs[hash] { return pending.bytes }
        do {
            return try reader.blob(roomId: room.id, hash: hash)
        } catch .corruptBlob {
            throw .corruptBlob(room: name)
        }
    }

    func find(room name: String, origin: UInt64, originSeq: UInt64) throws(StoreError) -> UInt64? {
        guard let room = rooms[name] else { return nil }
        if let seq = room.pendingOrigins[OriginKey(origin: origin, originSeq: originSeq)] { return seq }
        // Producers count up: above the high-water mark (or from an unseen origin while every
        // origin is tracked) the batch is new, and the database need not be asked.
        if let highest = room.originHighWater[origin] {
            if originSeq > highest { return nil }
        } else if room.everyOriginTracked {
            return nil
        }
        return try reader.find(roomId: room.id, origin: origin, originSeq: originSeq)
    }

    // MARK: Durability

    func pollDurable() -> [DurableMark] {
        absorb()
        let marks = unreportedMarks.map { DurableMark(room: $0.key, roomSeq: $0.value) }.sorted { $0.room < $1.room }
        unreportedMarks = [:]
        return marks
    }

    func pollFailures() -> [StoreError] {
        absorb()
        defer { unreportedFailures = [] }
        return unreportedFailures
    }

    func flush() throws(StoreError) {
        try checkOpen()
        defer { absorb() }
        try pipe.flush()
    }

    func close() {
        guard !closed else { return }
        pipe.close()
        absorb()
        closed = true
    }

    /// Applies the pipe's report: durable marks, pending bookkeeping, failure counters.
    private func absorb() {
        let report = pipe.drain()
        counters.commits += report.commits
        if report.commits > 0 { counters.lastCommitMicros = report.lastCommitMicros }
        counters.maxCommitMicros = max(counters.maxCommitMicros, report.maxCommitMicros)
        counters.totalCommitMicros += report.totalCommitMicros
        for failure in report.failures {
            counters.failedCommits += 1
            if failure.isDiskFull { counters.diskFullErrors += 1 }
            if failure.isIOError { counters.ioErrors += 1 }
            lastFailure = failure.description
            unreportedFailures.append(failure)
        }
        if !report.committed.isEmpty { lastFailure = nil }
        for op in report.committed {
            pendingOps -= 1
            pendingBytes -= op.byteCount
            guard let name = namesById[op.roomId], rooms[name] != nil else { continue }
            modifyRoom(name) { room in
                room.pendingOps -= 1
                switch op {
                case .append(_, let record):
                    if room.pending.first?.roomSeq == record.roomSeq { room.pending.removeFirst() }
                    room.pendingOrigins[OriginKey(origin: record.origin, originSeq: record.originSeq)] = nil
                    room.info.durableRoomSeq = record.roomSeq
                case .snapshot(_, let snapshot, _):
                    if room.pendingSnapshot?.uptoRoomSeq == snapshot.uptoRoomSeq { room.pendingSnapshot = nil }
                case .putBlob(_, let blob):
                    room.pendingBlobs[blob.hash] = nil
                case .createRoom, .deleteRoom:
                    break
                }
            }
            if case .append(_, let record) = op { unreportedMarks[name] = record.roomSeq }
        }
    }

    // MARK: Reading

    func readTail(room name: String, after: UInt64, maxRecords: Int, maxBytes: Int) throws(StoreError) -> TailPage {
        try checkOpen()
        guard let room = rooms[name] else { throw .roomNotFound(name) }
        let info = room.info
        if after + 1 < info.firstRoomSeq { throw .historyCompacted(room: name, firstAvailable: info.firstRoomSeq) }
        guard after < info.lastRoomSeq else { return TailPage(records: [], nextAfter: after, reachedEnd: true) }
        let limit = max(1, min(maxRecords, limits.maxPageRecords))
        var records: [BatchRecord]
        do {
            records = try reader.read(roomId: room.id, after: after, maxRecords: limit, maxBytes: maxBytes)
        } catch .corruptRecord(_, let seq) {
            throw .corruptRecord(room: name, roomSeq: seq)
        }
        var bytes = records.reduce(0) { $0 + $1.payload.count }
        var last = records.last?.roomSeq ?? after
        for record in room.pending.suffix(after: last) {
            guard records.count < limit, records.isEmpty || bytes + record.payload.count <= maxBytes else { break }
            records.append(record)
            bytes += record.payload.count
            last = record.roomSeq
        }
        for (index, record) in records.enumerated() where record.roomSeq != after + 1 + UInt64(index) {
            throw .corruptRecord(room: name, roomSeq: after + 1 + UInt64(index))
        }
        return TailPage(records: records, nextAfter: last, reachedEnd: last >= info.lastRoomSeq)
    }

    func latestSnapshot(room name: String) throws(StoreError) -> RoomSnapshot? {
        try checkOpen()
        guard let room = rooms[name] else { throw .roomNotFound(name) }
        if let pending = room.pendingSnapshot { return pending }
        return try reader.snapshot(roomId: room.id)
    }

    func writeSnapshot(room name: String, _ snapshot: RoomSnapshot) throws(StoreError) {
        try checkOpen()
        guard let info = rooms[name]?.info else { throw .roomNotFound(name) }
        guard snapshot.payload.count <= limits.maxSnapshotBytes else {
            throw .snapshotTooLarge(bytes: snapshot.payload.count, limit: limits.maxSnapshotBytes)
        }
        guard snapshot.digest.count <= StoreLimits.maxDigestBytes else { throw .digestTooLong(bytes: snapshot.digest.count) }
        guard snapshot.uptoRoomSeq >= 1, snapshot.uptoRoomSeq <= info.lastRoomSeq, snapshot.uptoRoomSeq >= info.snapshotUptoRoomSeq else {
            throw .snapshotOutOfRange(room: name, upto: snapshot.uptoRoomSeq, last: info.lastRoomSeq, previous: info.snapshotUptoRoomSeq)
        }
        let weight = snapshot.payload.count + snapshot.digest.count
        try checkBacklog(ops: 1, bytes: weight)  // may absorb commits: read the room after it
        let compact = info.retention == .board
        var removed = (count: 0, bytes: 0)
        if compact && snapshot.uptoRoomSeq >= info.firstRoomSeq, let room = rooms[name] {
            // Committed batches form a prefix of the log, so the pending ones above the
            // highest committed one are exactly the rest of the range.
            let committed = try reader.usage(roomId: room.id, from: info.firstRoomSeq, upto: snapshot.uptoRoomSeq)
            removed = (committed.count, committed.bytes)
            let above = max(committed.maxSeq, info.firstRoomSeq - 1)
            for record in room.pending.suffix(after: above) {
                if record.roomSeq > snapshot.uptoRoomSeq { break }
                removed.count += 1
                removed.bytes += record.payload.count
            }
        }
        let roomId = modifyRoom(name) { room in
            if compact && snapshot.uptoRoomSeq >= room.info.firstRoomSeq {
                room.info.firstRoomSeq = snapshot.uptoRoomSeq + 1
                room.info.recordCount -= removed.count
                room.info.historyBytes -= removed.bytes
            }
            room.info.snapshotUptoRoomSeq = snapshot.uptoRoomSeq
            room.pendingSnapshot = snapshot
            room.pendingOps += 1
            return room.id
        }
        enqueue(.snapshot(roomId: roomId, snapshot: snapshot, compact: compact))
    }

    // MARK: Usage

    var usage: StoreUsage {
        absorb()
        var usage = counters
        usage.rooms = rooms.count
        for room in rooms.values {
            usage.records += room.info.recordCount
            usage.historyBytes += room.info.historyBytes
        }
        usage.pendingOps = pendingOps
        usage.pendingBytes = pendingBytes
        return usage
    }

    // MARK: Helpers

    private func enqueue(_ op: StoreOp) {
        pendingOps += 1
        pendingBytes += op.byteCount
        pipe.submit(op)
    }

    private func checkOpen() throws(StoreError) {
        if closed { throw .closed }
    }

    private func checkRoomName(_ name: String) throws(StoreError) {
        let bytes = name.utf8.count
        guard bytes >= 1, bytes <= StoreLimits.maxRoomNameBytes, !name.utf8.contains(0) else { throw .invalidRoomName(name) }
    }

    private func checkBacklog(ops: Int, bytes: Int) throws(StoreError) {
        absorb()
        guard pendingOps + ops <= limits.maxPendingOps, pendingBytes + bytes <= limits.maxPendingBytes else {
            counters.refusedAppends += 1
            throw .backlogFull(pendingOps: pendingOps, pendingBytes: pendingBytes, lastFailure: lastFailure)
        }
    }
}

extension StoreOp {
    var roomId: Int64 {
        switch self {
        case .createRoom(let id, _, _, _): id
        case .append(let id, _), .snapshot(let id, _, _), .deleteRoom(let id), .putBlob(let id, _): id
        }
    }
}
