import InkUV

/// Decides which refusals of one offender get a log line: one per offender per minute, with the
/// count of refusals since its last line. A legacy app outside a listener's networks retries
/// every few seconds, a student's script a thousand times a second: either leaves one line a
/// minute. Every refusal is still counted in its metric whether logged or not.
final class OffenderLog<Offender: Hashable> {
    /// One line per offender per this long, µs.
    static var intervalMicroseconds: UInt64 { 60_000_000 }
    /// Offenders remembered at once. Past it, entries older than the interval are dropped; if
    /// every entry is recent (many offenders at once), a new offender is not logged: the
    /// counter still shows it, and the log stays bounded.
    static var maxOffenders: Int { 4096 }

    private struct Entry {
        var loggedAt: UInt64
        var unlogged: Int
    }
    private var entries: [Offender: Entry] = [:]

    var rememberedCount: Int { entries.count }

    /// Records a refusal of `offender` at `now` (µs). Returns nil when no line is due, else how
    /// many refusals of `offender` were not logged since its last line.
    func record(_ offender: Offender, now: UInt64) -> Int? {
        if var entry = entries[offender] {
            guard now &- entry.loggedAt >= Self.intervalMicroseconds else {
                entry.unlogged += 1
                entries[offender] = entry
                return nil
            }
            entries[offender] = Entry(loggedAt: now, unlogged: 0)
            return entry.unlogged
        }
        if entries.count >= Self.maxOffenders {
            entries = entries.filter { now &- $0.value.loggedAt < Self.intervalMicroseconds }
            guard entries.count < Self.maxOffenders else { return nil }
        }
        entries[offender] = Entry(loggedAt: now, unlogged: 0)
        return 0
    }
}

/// Legacy connections refused at accept, by address (nil: the address was unknown).
typealias LegacyRefusalLog = OffenderLog<SocketAddress?>
