/// A bit-exact port of glibc's default `rand()` (TYPE_3, the additive feedback generator),
/// so the KCP latency experiment draws the same numbers as KCP's own `test.cpp`.
///
/// `srand(seed)`: `r[0] = seed` (0 becomes 1), `r[i] = 16807 * r[i-1] mod (2^31 - 1)` for
/// i = 1...30 (Schrage's method, as glibc does it), `r[31...33] = r[0...2]`, then
/// `r[i] = r[i-3] + r[i-31]` modulo 2^32. The first 310 sums are discarded; every later one
/// yields `r[i] >> 1`.
public struct GlibcRandom: Sendable {
    /// glibc's `RAND_MAX`.
    public static let max: UInt32 = 2_147_483_647
    /// The generator's degree: the ring holds the last 31 values.
    static let degree = 31
    /// The lag of the second tap.
    static let separation = 3
    /// Outputs glibc throws away after seeding (10 * degree).
    static let discarded = 310

    private var ring: [UInt32]
    /// Index of the next value to produce, counted from r[0].
    private var position: Int

    public init(seed: UInt32) {
        ring = [UInt32](repeating: 0, count: Self.degree)
        var word = Int64(Int32(bitPattern: seed == 0 ? 1 : seed))
        ring[0] = UInt32(truncatingIfNeeded: word)
        for i in 1 ..< Self.degree {
            let hi = word / 127_773
            let lo = word % 127_773
            word = 16807 * lo - 2836 * hi
            if word < 0 { word += 2_147_483_647 }
            ring[i] = UInt32(truncatingIfNeeded: word)
        }
        // r[31...33] equal r[0...2], which already sit in their ring slots (i mod 31).
        position = Self.degree + 3
        for _ in 0 ..< Self.discarded { _ = step() }
    }

    /// The next value in 0 ... `GlibcRandom.max`, as `rand()` returns it.
    public mutating func next() -> UInt32 { step() >> 1 }

    private mutating func step() -> UInt32 {
        let slot = position % Self.degree
        let value = ring[slot] &+ ring[(position - Self.separation) % Self.degree]
        ring[slot] = value
        position = slot + 1 + Self.degree  // keep the index small; only its residue matters
        return value
    }
}
