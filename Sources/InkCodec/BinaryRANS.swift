// The entropy coder of the compact binary codec: byte-wise rANS with a 31-bit state and
// static 12-bit tables (docs/protocol.md section 2.2). rANS decodes without division, which is
// what lets a decoder run at tens of millions of points per second.
//
// Two choices keep tiny live batches tiny:
// - The encoder starts from state 1, not from the usual lower bound: the first ~23 bits of a
//   batch only grow the state instead of costing a 4-byte flush. The decoder reads a byte only
//   while its state is below the bound AND input remains, and must end in state 1.
// - The final state is written in as few bytes as it needs when nothing else was emitted.

enum RANSConstants {
    /// Lower bound of the normalised state interval [L, 256 L).
    static let lowerBound: UInt32 = 1 << 23
    /// The state an encoder starts from and a decoder must end in.
    static let initialState: UInt64 = 1
    /// Raw bits are put at most this many at a time.
    static let maxRawBits = 16
}

/// Collects the operations of one batch in decoding order, then codes them backwards.
struct RANSEncoder {
    /// An op is a global symbol index, or (rawFlag | count << 16 | value) for raw bits.
    private var ops: [UInt64] = []
    private var emitted: [UInt8] = []
    private static let rawFlag: UInt64 = 1 << 63

    init() {
        ops.reserveCapacity(1024)
        emitted.reserveCapacity(1024)
    }

    mutating func reset() {
        ops.removeAll(keepingCapacity: true)
    }

    @inline(__always)
    mutating func put(_ symbol: Int, _ table: BinaryTable) {
        ops.append(UInt64(table.base &+ symbol))
    }

    /// Puts `count` (0...16) raw bits of `value`.
    @inline(__always)
    mutating func putBits(_ value: UInt64, _ count: Int) {
        if count == 0 { return }
        ops.append(RANSEncoder.rawFlag | UInt64(count) << 16 | (value & ((1 << UInt64(count)) - 1)))
    }

    /// Puts any number (0...64) of raw bits, most significant chunk first.
    mutating func putWideBits(_ value: UInt64, _ count: Int) {
        var remaining = count
        while remaining > 0 {
            let k = min(RANSConstants.maxRawBits, remaining)
            remaining -= k
            putBits(value >> UInt64(remaining), k)
        }
    }

    /// Puts an unsigned integer: its bit length in 7 raw bits, then the bits below its top bit.
    mutating func putUInt(_ value: UInt64) {
        let length = 64 - value.leadingZeroBitCount
        putBits(UInt64(length), 7)
        if length > 1 { putWideBits(value, length - 1) }
    }

    /// Codes the collected ops and appends the batch's bytes to `out`.
    mutating func finish(into out: inout [UInt8]) {
        emitted.removeAll(keepingCapacity: true)
        let model = BinaryModel.shared
        let enc = model.enc
        var x = UInt32(RANSConstants.initialState)
        ops.withUnsafeBufferPointer { ops in
            var i = ops.count
            while i > 0 {
                i -= 1
                let op = ops[i]
                if op & RANSEncoder.rawFlag != 0 {
                    let k = UInt32(truncatingIfNeeded: op >> 16) & 0x1F
                    let xMax: UInt32 = 1 << (31 - k)
                    while x >= xMax {
                        emitted.append(UInt8(truncatingIfNeeded: x))
                        x >>= 8
                    }
                    x = (x << k) | UInt32(truncatingIfNeeded: op & 0xFFFF)
                } else {
                    let s = enc[Int(op)]
                    while x >= s.xMax {
                        emitted.append(UInt8(truncatingIfNeeded: x))
                        x >>= 8
                    }
                    let q = UInt32(truncatingIfNeeded: (UInt64(x) &* UInt64(s.rcpFreq)) >> 32) >> s.rcpShift
                    x = x &+ s.bias &+ q &* s.cmplFreq
                }
            }
        }
        // The final state (< 2^31), big-endian: 4 bytes when bytes follow, else as few as needed.
        var stateBytes = 4
        if emitted.isEmpty {
            stateBytes = 1
            while stateBytes < 4 && x >> (8 * UInt32(stateBytes)) != 0 { stateBytes += 1 }
        }
        var shift = 8 * (stateBytes - 1)
        while shift >= 0 {
            out.append(UInt8(truncatingIfNeeded: x >> UInt32(shift)))
            shift -= 8
        }
        var j = emitted.count
        while j > 0 {
            j -= 1
            out.append(emitted[j])
        }
    }
}

/// Decodes what `RANSEncoder` wrote. Never reads outside `bytes`; every error is reported by the
/// caller's structural checks and the final-state check in `isCleanEnd`.
struct RANSDecoder {
    private var x: UInt64
    private let bytes: UnsafeRawBufferPointer
    private var position: Int
    private let model = BinaryModel.shared

    /// Nil when `bytes` is empty or its state is one no encoder produces.
    init?(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return nil }
        self.bytes = bytes
        let stateBytes = bytes.count <= 4 ? bytes.count : 4
        var x: UInt64 = 0
        for i in 0..<stateBytes { x = x << 8 | UInt64(bytes[i]) }
        guard x < 1 << 31, x != 0 else { return nil }
        self.x = x
        position = stateBytes
        renormalise()
    }

    @inline(__always)
    private mutating func renormalise() {
        while x < UInt64(RANSConstants.lowerBound) && position < bytes.count {
            x = x << 8 | UInt64(bytes[position])
            position += 1
        }
    }

    @inline(__always)
    mutating func get(_ table: BinaryTable) -> Int {
        let slot = Int(truncatingIfNeeded: x) & Int(BinaryModel.total - 1)
        let symbol = Int(model.lut[table.id &* Int(BinaryModel.total) &+ slot])
        let g = table.base &+ symbol
        x = UInt64(model.freq[g]) &* (x >> UInt64(BinaryModel.scaleBits)) &+ UInt64(slot) &- UInt64(model.start[g])
        renormalise()
        return symbol
    }

    /// Reads `count` (0...16) raw bits.
    @inline(__always)
    mutating func getBits(_ count: Int) -> UInt64 {
        if count == 0 { return 0 }
        let value = x & ((1 << UInt64(count)) - 1)
        x >>= UInt64(count)
        renormalise()
        return value
    }

    mutating func getWideBits(_ count: Int) -> UInt64 {
        var value: UInt64 = 0
        var remaining = count
        while remaining > 0 {
            let k = min(RANSConstants.maxRawBits, remaining)
            remaining -= k
            value = value << UInt64(k) | getBits(k)
        }
        return value
    }

    /// Nil when the bit length is above 64.
    mutating func getUInt() -> UInt64? {
        let length = Int(getBits(7))
        if length == 0 { return 0 }
        if length > 64 { return nil }
        return (1 << UInt64(length - 1)) | getWideBits(length - 1)
    }

    /// True when every byte was consumed and the state is back where the encoder began.
    var isCleanEnd: Bool { position == bytes.count && x == RANSConstants.initialState }
}
