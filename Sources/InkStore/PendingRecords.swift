/// A room's appended-but-not-durable batches: consecutive sequence numbers, appended at the
/// back, removed from the front as commits are reported. O(1) both ways (a head index; the
/// storage is compacted once the dead prefix outweighs the live part).
struct PendingRecords {
    private var storage: [BatchRecord] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var first: BatchRecord? { isEmpty ? nil : storage[head] }

    mutating func append(_ record: BatchRecord) { storage.append(record) }

    mutating func removeFirst() {
        guard !isEmpty else { return }
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }

    /// The pending batches with `roomSeq > after`, in order.
    func suffix(after: UInt64) -> ArraySlice<BatchRecord> {
        guard let first else { return [] }
        let skip = after >= first.roomSeq ? Int(min(after - first.roomSeq + 1, UInt64(storage.count - head))) : 0
        return storage[(head + skip)...]
    }
}
