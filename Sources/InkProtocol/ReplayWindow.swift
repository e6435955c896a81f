/// The packet numbers one direction of a sealed session has opened (docs/protocol.md 4.3): the
/// largest, and a bitmap of the `size` below it. A number older than that, or seen, is refused
/// before any decryption; a number is marked only once its packet opened.
struct ReplayWindow {
    /// Numbers tracked below the largest. Reordering on a LAN is far smaller; a datagram older
    /// than this is dropped and the ARQ sends its segments again.
    static let size: UInt64 = 1024
    private static let words = Int(size / 64)

    /// One past the largest number marked (0: none yet).
    private(set) var next: UInt64 = 0
    /// Bit `n % size` is set when `n` (within the window) was marked.
    private var bits = [UInt64](repeating: 0, count: ReplayWindow.words)

    /// The largest number marked, if any.
    var largest: UInt64? { next == 0 ? nil : next - 1 }

    /// Whether `n` may still be opened (new, within the window).
    func isFresh(_ n: UInt64) -> Bool {
        if n >= next { return true }
        if next - n > ReplayWindow.size { return false }
        return !bit(n)
    }

    /// Records `n` as opened (only after `isFresh(n)` and a successful open).
    mutating func mark(_ n: UInt64) {
        if n >= next {
            // Clear the slots the window slides past (all of them after a long jump).
            let advance = n - next + 1
            if advance >= ReplayWindow.size {
                for i in 0..<ReplayWindow.words { bits[i] = 0 }
            } else {
                var k = next
                while k <= n {
                    clear(k)
                    k += 1
                }
            }
            next = n + 1
        }
        set(n)
    }

    private func bit(_ n: UInt64) -> Bool {
        let slot = n % ReplayWindow.size
        return bits[Int(slot / 64)] & (1 << (slot % 64)) != 0
    }

    private mutating func set(_ n: UInt64) {
        let slot = n % ReplayWindow.size
        bits[Int(slot / 64)] |= 1 << (slot % 64)
    }

    private mutating func clear(_ n: UInt64) {
        let slot = n % ReplayWindow.size
        bits[Int(slot / 64)] &= ~(1 << (slot % 64))
    }
}
