// The entropy coder of the compact binary codec: byte-wise rANS with a 32-bit state and
// static 12-bit tables (docs/protocol.md section 2.2). rANS decodes without division, which is
// what lets a decoder run at tens of millions of points per second.
//
// Two choices keep tiny live batches tiny:
// - The encoder starts from state 1, not from the usual lower bound: the first ~23 bits of a
//   batch only grow the state instead of costing a 4-byte flush. The decoder reads a byte only
//   while its state is below the bound AND input remains, and must end in state 1.
// - The final state is written in as few bytes as it needs when nothing else was emitted.

enum RANSConstants {
    /// Lower bound of the normalised state interval [L, 256 L) = [2^24, 2^32): the final state
    /// fills its 4 bytes (a 31-bit state wasted one bit per batch).
    static let lowerBound: UInt32 = 1 << 24
    /// The state an encoder starts from and a decoder must end in.
    static let initialState: UInt64 = 1
    /// Raw bits are put at most this many at a time (the state keeps at least 32 - 23 = 9).
    static let maxRawBits = 23
}

/// Collects the operations of one batch in decoding order, then codes them backwards.
/// A class only to own its scratch buffers; one per `BinaryBatchEncoder`, never shared.
final class RANSEncoder {
    /// An op is a global symbol index, or (rawFlag | count << 32 | value) for raw bits.
    private var ops: UnsafeMutablePointer<UInt64>
    private var opCount = 0
    private var opCapacity: Int
    /// Bytes are emitted backwards from the end of this buffer (each op emits at most 3).
    private var emitted: UnsafeMutablePointer<UInt8>
    private var emittedCapacity: Int
    private static let rawFlag: UInt64 = 1 << 63

    init() {
        opCapacity = 1024
        ops = .allocate(capacity: opCapacity)
        emittedCapacity = 3 * opCapacity + 8
        emitted = .allocate(capacity: emittedCapacity)
    }

    deinit {
        ops.deallocate()
        emitted.deallocate()
    }

    func reset() {
        opCount = 0
    }

    @inline(__always)
    private func append(_ op: UInt64) {
        if opCount == opCapacity { grow() }
        ops[opCount] = op
        opCount &+= 1
    }

    private func grow() {
        let bigger = UnsafeMutablePointer<UInt64>.allocate(capacity: opCapacity * 2)
        bigger.update(from: ops, count: opCount)
        ops.deallocate()
        ops = bigger
        opCapacity *= 2
    }

    @inline(__always)
    func put(_ symbol: Int, _ table: BinaryTable) {
        append(UInt64(table.base &+ symbol))
    }

    /// Puts `count` (0...23) raw bits of `value`.
    @inline(__always)
    func putBits(_ value: UInt64, _ count: Int) {
        if count == 0 { return }
        append(RANSEncoder.rawFlag | UInt64(count) << 32 | (value & ((1 << UInt64(count)) - 1)))
    }

    /// Puts any number (0...64) of raw bits, most significant chunk first.
    func putWideBits(_ value: UInt64, _ count: Int) {
        var remaining = count
        while remaining > 0 {
            let k = min(RANSConstants.maxRawBits, remaining)
            remaining -= k
            putBits(value >> UInt64(remaining), k)
        }
    }

    /// Puts an unsigned integer: its bit length in 7 raw bits, then the bits below its top bit.
    func putUInt(_ value: UInt64) {
        let length = 64 - value.leadingZeroBitCount
        putBits(UInt64(length), 7)
        if length > 1 { putWideBits(value, length - 1) }
    }

    /// Codes the collected ops and appends the batch's bytes to `out`.
    func finish(into out: inout [UInt8]) {
        if emittedCapacity < 3 * opCount + 8 {
            emitted.deallocate()
            emittedCapacity = 3 * opCapacity + 8
            emitted = .allocate(capacity: emittedCapacity)
        }
        let enc = BinaryModelPointers.shared.enc
        let ops = self.ops
        let emitted = self.emitted
        var position = emittedCapacity
        var x = UInt32(RANSConstants.initialState)
        var i = opCount
        while i > 0 {
            i &-= 1
            let op = ops[i]
            if op & RANSEncoder.rawFlag != 0 {
                let k = UInt32(truncatingIfNeeded: op >> 32) & 0x1F
                let xMax: UInt64 = 1 << (32 - UInt64(k))
                while UInt64(x) >= xMax {
                    position &-= 1
                    emitted[position] = UInt8(truncatingIfNeeded: x)
                    x >>= 8
                }
                x = (x << k) | UInt32(truncatingIfNeeded: op)
            } else {
                let s = enc[Int(truncatingIfNeeded: op)]
                while x >= s.xMax {
                    position &-= 1
                    emitted[position] = UInt8(truncatingIfNeeded: x)
                    x >>= 8
                }
                let q = UInt32(truncatingIfNeeded: UInt64(x).multipliedFullWidth(by: s.rcpFreq).high)
                x = x &+ s.bias &+ q &* s.cmplFreq
            }
        }
        // The final state, big-endian: 4 bytes when bytes follow, else as few as needed.
        var stateBytes = 4
        if position == emittedCapacity {
            stateBytes = 1
            while stateBytes < 4 && x >> (8 * UInt32(stateBytes)) != 0 { stateBytes += 1 }
        }
        for _ in 0..<stateBytes {
            position &-= 1
            emitted[position] = UInt8(truncatingIfNeeded: x)
            x >>= 8
        }
        out.append(contentsOf: UnsafeBufferPointer(start: emitted + position, count: emittedCapacity - position))
    }
}

/// Decodes what `RANSEncoder` wrote. Never reads outside `bytes`; every error is reported by the
/// caller's structural checks and the final-state check in `isCleanEnd`.
struct RANSDecoder {
    private var x: UInt64
    private let bytes: UnsafeRawBufferPointer
    private var position: Int
    private let lut: UnsafeMutablePointer<UInt8>
    private let freqStart: UnsafeMutablePointer<UInt32>

    /// Nil when `bytes` is empty or its state is one no encoder produces.
    init?(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return nil }
        self.bytes = bytes
        let model = BinaryModelPointers.shared
        lut = model.lut
        freqStart = model.freqStart
        let stateBytes = bytes.count <= 4 ? bytes.count : 4
        var x: UInt64 = 0
        for i in 0..<stateBytes { x = x << 8 | UInt64(bytes[i]) }
        // Canonical form: a short state has no leading zero byte; a 4-byte state followed by
        // bytes is normalised (the encoder only emits bytes once its state reached the bound).
        guard x != 0, bytes[0] != 0 || bytes.count > 4 else { return nil }
        guard bytes.count <= 4 || x >= UInt64(RANSConstants.lowerBound) else { return nil }
        self.x = x
        position = stateBytes
    }

    /// Reads bytes while the state is below the bound and input remains. `xMax` is the
    /// encoder's emission threshold for the op just decoded: when the input runs out with the
    /// state still below the bound (the encoder's first emission), the encoder must have been at
    /// or above that threshold after the first byte read here, or these bytes are not canonical.
    @inline(__always)
    private mutating func renormalise(xMax: UInt64) {
        guard x < UInt64(RANSConstants.lowerBound) && position < bytes.count else { return }
        x = x << 8 | UInt64(bytes[position])
        position += 1
        let first = x
        while x < UInt64(RANSConstants.lowerBound) && position < bytes.count {
            x = x << 8 | UInt64(bytes[position])
            position += 1
        }
        if x < UInt64(RANSConstants.lowerBound) && first < xMax { isCanonical = false }
    }

    /// False once the input holds bytes where no encoder would have put them.
    private var isCanonical = true

    @inline(__always)
    mutating func get(_ table: BinaryTable) -> Int {
        let slot = Int(truncatingIfNeeded: x) & Int(BinaryModel.total - 1)
        let symbol = Int(truncatingIfNeeded: lut[table.id &* Int(BinaryModel.total) &+ slot])
        let fs = UInt64(freqStart[table.base &+ symbol])
        x = (fs & 0xFFFF) &* (x >> UInt64(BinaryModel.scaleBits)) &+ UInt64(slot) &- (fs >> 16)
        renormalise(xMax: (fs & 0xFFFF) << (32 - UInt64(BinaryModel.scaleBits)))
        return symbol
    }

    /// Reads `count` (0...23) raw bits.
    @inline(__always)
    mutating func getBits(_ count: Int) -> UInt64 {
        if count == 0 { return 0 }
        let value = x & ((1 << UInt64(count)) - 1)
        x >>= UInt64(count)
        renormalise(xMax: 1 << (32 - UInt64(count)))
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

    /// True when every byte was consumed and the state is back where the encoder began: the end
    /// of the batch (no op that has a successor can leave the state there, see `BinaryBatchDecoder`).
    var isAtEnd: Bool { position == bytes.count && x == RANSConstants.initialState }

    /// `isAtEnd`, and every byte was where an encoder would have put it.
    var isCleanEnd: Bool { position == bytes.count && x == RANSConstants.initialState && isCanonical }
}
