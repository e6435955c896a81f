import InkUV

/// Decides which refused legacy connections get a log line: one per address per minute, so an
/// app outside the networks that reconnects every few seconds (the app retries on its own)
/// leaves one line a minute, with the count of refusals since its last line. Every refusal is
/// counted in `inkwire_legacy_refused_total` whether logged or not.
final class LegacyRefusalLog {
    /// One line per address per this long, µs.
    static let intervalMicroseconds: UInt64 = 60_000_000
    /// Addresses remembered at once. Past it, entries older than the interval are dropped; if
    /// every entry is recent (many addresses at once), a new address is not logged: the
    /// counter still shows it, and the log stays bounded.
    static let maxAddresses = 4096

    private struct Entry {
        var loggedAt: UInt64
        var unlogged: Int
    }
    private var entries: [SocketAddress?: Entry] = [:]

    var rememberedCount: Int { entries.count }

    /// Records a refusal of `host` (nil: the address was unknown) at `now` (µs). Returns nil
    /// when no line is due, else how many refusals of `host` were not logged since its last line.
    func record(_ host: SocketAddress?, now: UInt64) -> Int? {
        if var entry = entries[host] {
            guard now &- entry.loggedAt >= LegacyRefusalLog.intervalMicroseconds else {
                entry.unlogged += 1
                entries[host] = entry
                return nil
            }
            entries[host] = Entry(loggedAt: now, unlogged: 0)
            return entry.unlogged
        }
        if entries.count >= LegacyRefusalLog.maxAddresses {
            entries = entries.filter { now &- $0.value.loggedAt < LegacyRefusalLog.intervalMicroseconds }
            guard entries.count < LegacyRefusalLog.maxAddresses else { return nil }
        }
        entries[host] = Entry(loggedAt: now, unlogged: 0)
        return 0
    }
}
