// The newest part of a room's log, kept in memory for catch-up and tail sync.
import InkCodec

/// One log entry with its decoded batch (so live delivery re-encodes without decoding again).
/// A class: fan-out reads an entry once per member, and a reference is one count where a
/// copied struct counted every string and array of the record and the batch.
final class TailEntry {
    let record: RelayRecord
    let batch: Batch

    init(record: RelayRecord, batch: Batch) {
        self.record = record
        self.batch = batch
    }

    /// What this entry counts against `RelayLimits.tailBytes`.
    var cost: Int { record.payload.count + batch.commands.count * 40 + 64 }
}

/// A bounded window of consecutive log entries `firstSeq...lastSeq`; the oldest fall off when
/// a bound (entries or bytes) is passed. Memory is shared by all members: a member's cursor is
/// an index into it, so a slow member costs nothing here.
struct RoomTail {
    let maxEntries: Int
    let maxBytes: Int
    private var entries: [TailEntry] = []
    private var start = 0
    private(set) var bytes = 0
    /// Room sequence number of `entries[start]` (or of the next append when empty).
    private(set) var firstSeq: UInt64 = 1

    init(maxEntries: Int, maxBytes: Int) {
        self.maxEntries = max(1, maxEntries)
        self.maxBytes = max(1, maxBytes)
    }

    var count: Int { entries.count - start }
    /// The last sequence number held, `firstSeq - 1` when empty.
    var lastSeq: UInt64 { firstSeq + UInt64(count) - 1 }

    /// Whether every entry after `seq` up to the last one is held.
    func coversAfter(_ seq: UInt64) -> Bool { seq + 1 >= firstSeq }

    func entry(_ seq: UInt64) -> TailEntry? {
        guard seq >= firstSeq, seq <= lastSeq else { return nil }
        return entries[start + Int(seq - firstSeq)]
    }

    /// The room sequence number of the batch `(origin, originSeq)`, newest first (duplicates only).
    func find(origin: UInt64, originSeq: UInt64) -> UInt64? {
        var i = entries.count - 1
        while i >= start {
            let r = entries[i].record
            if r.origin == origin && r.originSeq == originSeq { return r.roomSeq }
            i -= 1
        }
        return nil
    }

    /// Appends the entry for `lastSeq + 1`.
    mutating func append(_ entry: TailEntry) {
        if count == 0 { firstSeq = entry.record.roomSeq }
        entries.append(entry)
        bytes += entry.cost
        while count > 1 && (count > maxEntries || bytes > maxBytes) {
            bytes -= entries[start].cost
            start += 1
            firstSeq += 1
        }
        if start > 1024 && start * 2 > entries.count {
            entries.removeFirst(start)
            start = 0
        }
    }

    /// Forgets everything and continues after `seq` (a restored snapshot).
    mutating func reset(after seq: UInt64) {
        entries = []
        start = 0
        bytes = 0
        firstSeq = seq + 1
    }
}
