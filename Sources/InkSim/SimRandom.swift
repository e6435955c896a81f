/// The simulator's one source of randomness: xoshiro256** seeded through splitmix64.
///
/// Every random decision of a run (topology, fault rates, each loss and delay draw) comes from
/// a `SimRandom` derived from the run's seed, so one seed replays the run exactly. The mapping
/// from raw bits to ranges is written here rather than borrowed from the standard library, whose
/// algorithms may change between toolchains.
public struct SimRandom: Sendable {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    public init(seed: UInt64) {
        var x = seed
        func splitmix() -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s0 = splitmix()
        s1 = splitmix()
        s2 = splitmix()
        s3 = splitmix()
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = s3 << 45 | s3 >> 19
        return result
    }

    /// Uniform in `0 ..< bound` without modulo bias (Lemire's multiply-and-reject); 0 if `bound` is 0.
    public mutating func below(_ bound: UInt64) -> UInt64 {
        guard bound > 0 else { return 0 }
        var product = next().multipliedFullWidth(by: bound)
        if product.low < bound {
            let threshold = (0 &- bound) % bound
            while product.low < threshold { product = next().multipliedFullWidth(by: bound) }
        }
        return product.high
    }

    /// Uniform in `range`.
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = UInt64(bitPattern: Int64(range.upperBound &- range.lowerBound)) &+ 1
        return range.lowerBound &+ Int(truncatingIfNeeded: span == 0 ? next() : below(span))
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// True with probability `p` (values outside [0, 1] act as 0 or 1).
    public mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// An independent stream for one part of the simulation (a link, a workload), so adding a
    /// draw in one part does not shift every later draw in the others.
    public mutating func split() -> SimRandom { SimRandom(seed: next()) }
}
