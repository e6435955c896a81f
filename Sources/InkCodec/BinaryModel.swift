// The static models of the compact binary codec: the frozen tables of BinaryTables, flattened
// once into immortal buffers that the rANS coder indexes without bounds checks or ARC traffic.

/// Which frozen table codes a symbol. Every table sums to `BinaryModel.total`.
struct BinaryTable: Sendable {
    /// Index of the table among all tables.
    let id: Int
    /// Offset of its first symbol in the flat per-symbol arrays (fixed by the alphabet sizes).
    let base: Int

    static let headerAlphabet = 4
    static let kindAlphabet = 20
    static let timeAlphabet = 32
    static let residualAlphabet = 124
    static let signAlphabet = 2
    static let kindCount = 4
    static let residualCount = 20
    static let signCount = 12
    static let count = 1 + kindCount + 4 + residualCount + signCount

    static let header = BinaryTable(id: 0, base: 0)
    /// `kind(context)`: 0 when the author has no open stroke, else the remembered point count
    /// (1...3) of the open stroke.
    @inline(__always)
    static func kind(_ context: Int) -> BinaryTable { BinaryTable(id: 1 &+ context, base: 4 &+ 20 &* context) }
    /// `time(group)`: 0 move, 1 end, 2 other point, 3 any other command.
    @inline(__always)
    static func time(_ group: Int) -> BinaryTable { BinaryTable(id: 5 &+ group, base: 84 &+ 32 &* group) }
    /// Residual tables: 0 and 1 code a stroke's first point (x, y); then per remembered point
    /// count n in 1...3 and time class c in 0...2, table 2 + ((n - 1) * 3 + c) * 2 + (0 x, 1 y).
    @inline(__always)
    static func residual(_ index: Int) -> BinaryTable { BinaryTable(id: 9 &+ index, base: 212 &+ 124 &* index) }
    /// Sign tables of points with n = 0, 1, 2 remembered points: 4 n + 0 for x, 4 n + 1 + (0 when
    /// x's residual is 0, 1 when positive, 2 when negative) for y.
    @inline(__always)
    static func sign(_ index: Int) -> BinaryTable { BinaryTable(id: 29 &+ index, base: 2692 &+ 2 &* index) }
}

/// Encoder view of one symbol: a reciprocal form, so encoding needs no division. For a state
/// x < 2^32, x div freq = high 64 bits of x * ceil(2^64 / freq) (exact: freq < 2^12); a symbol
/// of frequency 1 uses 2^64 - 1 (giving x - 1) and folds the difference into `bias`.
struct RANSEncSymbol {
    var rcpFreq: UInt64
    /// Renormalise (emit bytes) while the state is at or above this.
    var xMax: UInt32
    var bias: UInt32
    var cmplFreq: UInt32
}

/// The model's buffers as plain pointers (immortal), so the coder's hot paths touch no class
/// reference (no retain/release per batch).
struct BinaryModelPointers: @unchecked Sendable {
    let enc: UnsafeMutablePointer<RANSEncSymbol>
    /// The decoder's tables behind one pointer (one register in the decode loop): per global
    /// symbol its `freqStart` word from offset 0, the slot-to-symbol `lut` from `lutOffset`.
    let dec: UnsafeRawPointer
    static let shared = BinaryModelPointers(enc: BinaryModel.shared.enc, dec: UnsafeRawPointer(BinaryModel.shared.freqStart))
}

/// The flattened tables. Built once, never freed (it lives as long as the process).
final class BinaryModel: @unchecked Sendable {
    /// Probability scale: every table sums to 2^scaleBits.
    static let scaleBits: UInt32 = 12
    static let total: UInt32 = 1 << scaleBits

    static let shared = BinaryModel()

    /// Per table: offset of its first symbol in the flat symbol arrays, and its alphabet size.
    let base: [Int]
    let alphabet: [Int]
    /// Flat per-symbol arrays (all tables concatenated).
    let start: UnsafeMutablePointer<UInt16>
    let freq: UnsafeMutablePointer<UInt16>
    let enc: UnsafeMutablePointer<RANSEncSymbol>
    /// Per table, `total` entries, one per slot: the symbol owning the slot. One byte a slot
    /// keeps the hot tables in the L1 cache.
    let lut: UnsafeMutablePointer<UInt8>
    /// Per global symbol: frequency (bits 0-15) and start (bits 16-31), one load for the decoder.
    let freqStart: UnsafeMutablePointer<UInt32>
    /// Byte offset of `lut` after `freqStart` in their shared buffer (room for 3072 symbols).
    static let lutOffset = 1 << 14
    /// Byte offset of the residual magnitude table in that buffer, after `freqStart`: per
    /// magnitude symbol one word, its smallest magnitude << 8 | its count of extra raw bits.
    static let magnitudeOffset = 3 << 12

    private init() {
        let rows: [[UInt16]] = BinaryTables.header + BinaryTables.kind + BinaryTables.time + BinaryTables.residual
            + BinaryTables.sign
        precondition(rows.count == BinaryTable.count, "BinaryTables shape")
        var base: [Int] = []
        var alphabet: [Int] = []
        var n = 0
        for row in rows {
            base.append(n)
            alphabet.append(row.count)
            n += row.count
        }
        for table in [BinaryTable.header, .kind(BinaryTable.kindCount - 1), .time(3),
                      .residual(BinaryTable.residualCount - 1), .sign(BinaryTable.signCount - 1)] {
            precondition(base[table.id] == table.base, "BinaryTable bases")
        }
        precondition(alphabet[BinaryTable.residual(0).id] == BinaryTable.residualAlphabet)
        precondition(alphabet[BinaryTable.sign(0).id] == BinaryTable.signAlphabet)
        self.base = base
        self.alphabet = alphabet
        start = .allocate(capacity: n)
        freq = .allocate(capacity: n)
        enc = .allocate(capacity: n)
        precondition(n * 4 <= BinaryModel.magnitudeOffset, "freqStart fits before the magnitudes")
        precondition(BinaryModel.magnitudeOffset + 8 * BinaryTable.residualAlphabet <= BinaryModel.lutOffset)
        let decoderTables = UnsafeMutableRawPointer.allocate(
            byteCount: BinaryModel.lutOffset + rows.count * Int(BinaryModel.total), alignment: 64)
        freqStart = decoderTables.bindMemory(to: UInt32.self, capacity: n)
        lut = (decoderTables + BinaryModel.lutOffset).bindMemory(to: UInt8.self, capacity: rows.count * Int(BinaryModel.total))
        let magnitudes = (decoderTables + BinaryModel.magnitudeOffset)
            .bindMemory(to: UInt64.self, capacity: BinaryTable.residualAlphabet)
        for symbol in 0..<BinaryTable.residualAlphabet {
            let smallest = BinaryPrediction.residual(symbol, extra: 0)
            magnitudes[symbol] = UInt64(smallest) << 8 | UInt64(BinaryPrediction.extraBits(symbol))
        }
        let scale = BinaryModel.scaleBits
        let l = RANSConstants.lowerBound
        for (t, row) in rows.enumerated() {
            var cumulative: UInt32 = 0
            for (s, f16) in row.enumerated() {
                let f = UInt32(f16)
                precondition(f >= 1, "every symbol must stay codable")
                let g = base[t] + s
                start[g] = UInt16(cumulative)
                freq[g] = f16
                freqStart[g] = f | cumulative << 16
                for slot in cumulative..<(cumulative + f) {
                    lut[t * Int(BinaryModel.total) + Int(slot)] = UInt8(s)
                }
                var e = RANSEncSymbol(
                    rcpFreq: 0, xMax: ((l >> scale) << 8) * f, bias: 0, cmplFreq: BinaryModel.total - f)
                if f < 2 {
                    e.rcpFreq = ~0
                    e.bias = cumulative + BinaryModel.total - 1
                } else {
                    // ceil(2^64 / f) = (2^64 - 1) div f + 1 for every f >= 2.
                    e.rcpFreq = UInt64.max / UInt64(f) + 1
                    e.bias = cumulative
                }
                enc[g] = e
                cumulative += f
            }
            precondition(cumulative == BinaryModel.total, "table \(t) must sum to \(BinaryModel.total)")
        }
    }
}
