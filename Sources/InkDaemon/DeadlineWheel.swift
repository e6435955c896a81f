/// Something with at most one deadline in a `DeadlineWheel`: the whole millisecond it is armed
/// for, kept by the wheel (nil when not armed).
protocol DeadlineWheelMember: AnyObject {
    var wheelMilliseconds: UInt64? { get set }
}

/// Deadlines of many members (the daemon's UDP sessions) in whole milliseconds, for one loop
/// timer: a hashed wheel of `DeadlineWheelSlots.count` one-millisecond slots.
///
/// Why not one libuv timer per session: every datagram moves a session's deadline (the probe
/// timeout after a send, the keepalive after its ack), and each move re-sorted libuv's timer
/// heap, whose nodes live in thousands of separate allocations (3-6 % of the daemon's CPU at
/// 2000 sessions). Here arming is an append to a slot. An entry superseded by a later arming
/// stays where it is and is dropped when its slot comes round (its member no longer names that
/// millisecond), so the wheel holds at most one entry per arming of the last lap
/// (`DeadlineWheelSlots.count` ms) plus one per member. A deadline beyond one lap sits in its
/// slot until the lap it is due in.
///
/// Call order: `arm`/`disarm` at will; when the loop timer reaches `nextMilliseconds`, call
/// `expire(nowMilliseconds:)` and act on the members it returns, then re-arm the loop timer at
/// the new `nextMilliseconds`. Expiring early or twice is harmless.
final class DeadlineWheel<Member: DeadlineWheelMember> {
    private struct Entry {
        let milliseconds: UInt64
        let member: Member
    }

    private var slots: [[Entry]]
    /// Every slot up to this millisecond has been expired.
    private(set) var sweptThrough: UInt64
    /// The earliest millisecond something may be due (a superseded entry can make it early,
    /// never late); nil when nothing is armed.
    private(set) var nextMilliseconds: UInt64?
    /// Entries held, superseded ones included.
    private(set) var entryCount = 0

    init(nowMilliseconds: UInt64) {
        slots = Array(repeating: [], count: DeadlineWheelSlots.count)
        sweptThrough = nowMilliseconds
    }

    /// Arms `member` for `milliseconds` (a millisecond already expired counts as the next one),
    /// replacing its earlier deadline. Returns true when `nextMilliseconds` moved earlier: the
    /// loop timer must be re-armed.
    @discardableResult
    func arm(_ member: Member, milliseconds: UInt64) -> Bool {
        let due = max(milliseconds, sweptThrough + 1)
        if member.wheelMilliseconds == due { return false }
        member.wheelMilliseconds = due
        slots[DeadlineWheelSlots.index(due)].append(Entry(milliseconds: due, member: member))
        entryCount += 1
        if let next = nextMilliseconds, next <= due { return false }
        nextMilliseconds = due
        return true
    }

    /// Forgets `member`'s deadline (its entry is dropped when its slot comes round).
    func disarm(_ member: Member) {
        member.wheelMilliseconds = nil
    }

    /// Appends the members whose deadline is at or before `nowMilliseconds` to `due` (in
    /// deadline order within one lap, then arming order) and disarms them; then finds the next
    /// deadline.
    func expire(nowMilliseconds now: UInt64, into due: inout [Member]) {
        if now > sweptThrough {
            let span = min(now - sweptThrough, UInt64(DeadlineWheelSlots.count))
            var ms = now - span + 1
            while ms <= now {
                sweep(slot: DeadlineWheelSlots.index(ms), now: now, due: &due)
                ms += 1
            }
            sweptThrough = now
        }
        nextMilliseconds = findNext()
    }

    private func sweep(slot: Int, now: UInt64, due: inout [Member]) {
        guard !slots[slot].isEmpty else { return }
        var kept = 0
        // The slot's buffer goes with its entries: a slot keeping the capacity of its busiest
        // lap (thousands of joins) held megabytes for good.
        let entries = slots[slot]
        slots[slot] = []
        for e in entries {
            guard e.member.wheelMilliseconds == e.milliseconds else { continue }  // superseded
            if e.milliseconds <= now {
                e.member.wheelMilliseconds = nil
                due.append(e.member)
            } else {
                slots[slot].append(e)  // a later lap
                kept += 1
            }
        }
        entryCount -= entries.count - kept
    }

    /// The first armed millisecond after `sweptThrough`, dropping superseded entries on the way.
    private func findNext() -> UInt64? {
        guard entryCount > 0 else { return nil }
        var laterLap: UInt64?
        for step in 1...UInt64(DeadlineWheelSlots.count) {
            let ms = sweptThrough + step
            let slot = DeadlineWheelSlots.index(ms)
            guard !slots[slot].isEmpty else { continue }
            var found = false
            let before = slots[slot].count
            slots[slot].removeAll { e in
                guard e.member.wheelMilliseconds == e.milliseconds else { return true }
                if e.milliseconds == ms {
                    found = true
                } else if laterLap.map({ e.milliseconds < $0 }) ?? true {
                    laterLap = e.milliseconds
                }
                return false
            }
            entryCount -= before - slots[slot].count
            if found { return ms }
            if entryCount == 0 { return nil }
        }
        return laterLap
    }
}

/// The wheel's size: one slot per millisecond, a power of two (an index is a mask).
enum DeadlineWheelSlots {
    /// Slots (milliseconds) in one lap: ARQ deadlines (acks, probes, losses) fall within it;
    /// keepalives (5 s) and the dead-peer timeout (15 s) wait a lap or more in their slot.
    static let count = 4096

    @inline(__always)
    static func index(_ milliseconds: UInt64) -> Int { Int(milliseconds & UInt64(count - 1)) }
}
