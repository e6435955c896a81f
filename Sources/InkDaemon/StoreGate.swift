import InkProtocol
import InkRelay
import InkStore

/// Between the relay and the room log. Appends the relay's records in room order; holds a
/// record the store refuses because its backlog is full (a full or failing disk) and appends it
/// once the store drains; answers the relay's admission (nothing more is taken while a record
/// is held, and a room's kept history stays under `--max-room-history-bytes`); logs and counts
/// storage failures and recoveries. Policy (docs/storage.md, "Full disk"): live relay goes on,
/// acknowledgements wait until the batch is written, nothing relayed is ever dropped.
final class StoreGate: BatchAdmission {
    private let store: RoomLogStore
    private let logger: Logger
    let metrics: StoreMetrics
    /// Changes on reload (SIGHUP).
    var maxRoomHistoryBytes: Int
    /// Records the store refused for its backlog, oldest first. Admission refuses every batch
    /// while one is held, so at most one input's record lands here; the bound is a safety net.
    private var held: [RelayRecord] = []
    /// Most records held; past it a record is dropped (logged, counted): never expected.
    static let maxHeldRecords = 1024
    /// A commit failed and none succeeded since.
    private(set) var failing = false
    private var commitsAtFailure: UInt64 = 0
    private var lastFailure = ""
    /// Asked to compact a room that reached its history limit (board retention frees space).
    var compactRoom: ((String) -> Void)?

    init(store: RoomLogStore, logger: Logger, metrics: StoreMetrics, maxRoomHistoryBytes: Int) {
        self.store = store
        self.logger = logger
        self.metrics = metrics
        self.maxRoomHistoryBytes = maxRoomHistoryBytes
    }

    var isHolding: Bool { !held.isEmpty }
    func isHolding(room: String) -> Bool { held.contains { $0.room == room } }

    // MARK: admission (asked by the relay before it numbers a batch)

    func admit(room: String, bytes: Int) -> BatchRefusal? {
        if !held.isEmpty {
            metrics.refusedBatches.labels("storage_unavailable").increment()
            return BatchRefusal(.storageUnavailable, "the room log cannot store more now (\(lastFailure.isEmpty ? "backlog full" : lastFailure)); send it again later")
        }
        var kept = store.room(room)?.historyBytes ?? 0
        if kept + bytes > maxRoomHistoryBytes, store.room(room)?.retention == .board, let compactRoom {
            compactRoom(room)
            kept = store.room(room)?.historyBytes ?? 0
        }
        guard kept + bytes <= maxRoomHistoryBytes else {
            metrics.refusedBatches.labels("history_full").increment()
            logger.warning("batch refused: room history full", ["room": room, "history_bytes": kept, "batch_bytes": bytes, "limit": maxRoomHistoryBytes])
            return BatchRefusal(.historyFull, "room history is full (\(kept) of \(maxRoomHistoryBytes) bytes kept)")
        }
        return nil
    }

    // MARK: appending

    /// Appends `record` (or holds it behind earlier held ones); the outcome when the store took it now.
    func append(_ record: RelayRecord) -> AppendOutcome? {
        guard held.isEmpty else {
            hold(record)
            return nil
        }
        do {
            return try store.append(Self.batch(record))
        } catch {
            if case .backlogFull(let ops, let bytes, let failure) = error {
                hold(record)
                logger.error("room log backlog full: new batches are refused until it drains", [
                    "room": record.room, "room_seq": record.roomSeq, "pending_ops": ops, "pending_bytes": bytes,
                    "last_failure": failure ?? "none",
                ])
            } else {
                metrics.failures.labels("append").increment()
                logger.error("batch not stored; its author gets no acknowledgement", ["room": record.room, "room_seq": record.roomSeq, "error": error])
            }
            return nil
        }
    }

    /// Appends held records while the store takes them; returns the rooms appended to, in order.
    func retryHeld() -> [String] {
        var rooms: [String] = []
        while let record = held.first {
            do {
                _ = try store.append(Self.batch(record))
                rooms.append(record.room)
            } catch {
                if case .backlogFull = error { break }
                metrics.failures.labels("append").increment()
                logger.error("held batch not stored; its author gets no acknowledgement", ["room": record.room, "room_seq": record.roomSeq, "error": error])
            }
            held.removeFirst()
        }
        metrics.heldBatches.set(held.count)
        if !rooms.isEmpty && held.isEmpty {
            logger.notice("room log takes batches again", ["held_written": rooms.count])
        }
        return rooms
    }

    private func hold(_ record: RelayRecord) {
        guard held.count < Self.maxHeldRecords else {
            metrics.failures.labels("held_dropped").increment()
            logger.error("batch dropped: too many held for the room log", ["room": record.room, "room_seq": record.roomSeq])
            return
        }
        held.append(record)
        metrics.heldBatches.set(held.count)
    }

    static func batch(_ record: RelayRecord) -> NewBatch {
        NewBatch(room: record.room, origin: record.origin, originSeq: record.originSeq, author: record.authorLabel,
                 receivedAtMs: record.timeMs, payload: record.payload, expectedRoomSeq: record.roomSeq)
    }

    // MARK: failures

    /// The store's failures since the last call (and whether it committed since): one clear
    /// log line when writing starts failing, one when it works again; every failure counted.
    func absorb(_ failures: [StoreError], dataDir: String) {
        for failure in failures {
            let kind = failure.isDiskFull ? "disk_full" : failure.isIOError ? "io" : "other"
            metrics.failures.labels(kind).increment()
            lastFailure = failure.isDiskFull ? "disk full" : "\(failure)"
            if !failing {
                failing = true
                commitsAtFailure = store.usage.commits
                metrics.failing.set(1)
                let usage = store.usage
                logger.error(failure.isDiskFull
                             ? "room log write failed: disk full; live relay goes on, batches wait in memory unacknowledged and are retried"
                             : "room log write failed; live relay goes on, batches wait in memory unacknowledged and are retried",
                             ["data_dir": dataDir, "pending_ops": usage.pendingOps, "pending_bytes": usage.pendingBytes, "error": failure])
            } else {
                logger.debug("room log write failed again; retrying", ["error": failure])
            }
        }
        if failing && failures.isEmpty {
            let usage = store.usage
            if usage.commits > commitsAtFailure {
                failing = false
                lastFailure = ""
                metrics.failing.set(0)
                logger.notice("room log writes again; waiting batches are being written", ["data_dir": dataDir, "pending_ops": usage.pendingOps])
            }
        }
    }
}

/// The room log's series, registered into the daemon's registry.
final class StoreMetrics {
    let failures: Counter
    let failing: Gauge
    let heldBatches: Gauge
    let refusedBatches: Counter
    let roomsExpired: Counter

    init(registry: MetricsRegistry) {
        failures = registry.counter("inkwire_store_failures_total", help: "Room log failures, by kind (disk_full, io, other: failed commits, retried; append: a batch not stored).", labels: ["kind"])
        failing = registry.gauge("inkwire_store_failing", help: "1 while room log commits fail (batches wait in memory, unacknowledged).")
        heldBatches = registry.gauge("inkwire_store_held_batches", help: "Batches held by the daemon because the room log backlog is full.")
        refusedBatches = registry.counter("inkwire_refused_batches_total", help: "Batches refused to their author by the room log, by reason.", labels: ["reason"])
        roomsExpired = registry.counter("inkwire_rooms_expired_total", help: "Idle rooms whose history was deleted (--room-idle-expiry).")
        for kind in ["disk_full", "io", "other", "append"] { _ = failures.labels(kind) }
        for reason in ["history_full", "storage_unavailable"] { _ = refusedBatches.labels(reason) }
    }
}
