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

/// The ops of one batch, appended in decoding order through a cursor that the batch encoder
/// keeps in registers. It never checks capacity: whoever holds one first reserves room with
/// `RANSEncoder.reserve` (at most `RANSEncoder.maxOpsPerCommand` per command, plus an opaque
/// payload's byte count).
struct RANSOpWriter {
    fileprivate(set) var ops: UnsafeMutablePointer<UInt64>
    fileprivate(set) var count = 0

    /// An op is a global symbol index, or (rawFlag | count << 32 | value) for raw bits.
    fileprivate static let rawFlag: UInt64 = 1 << 63

    @inline(always)
    mutating func put(_ symbol: Int, _ table: BinaryTable) {
        ops[count] = UInt64(truncatingIfNeeded: table.base &+ symbol)
        count &+= 1
    }

    /// Puts `count` (0...23) raw bits of `value`.
    @inline(always)
    mutating func putBits(_ value: UInt64, _ bits: Int) {
        if bits == 0 { return }
        ops[count] = RANSOpWriter.rawFlag | UInt64(bits) << 32 | (value & ((1 << UInt64(bits)) &- 1))
        count &+= 1
    }

    // Multi-chunk puts are rare (large residuals, ids, lengths): they run out of line on a copy,
    // so that the batch encoder's writer never has its address taken and stays in registers.

    /// Puts any number (0...64) of raw bits, most significant chunk first.
    @inline(always)
    mutating func putWideBits(_ value: UInt64, _ bits: Int) {
        var copy = self
        copy.writeWideBits(value, bits)
        self = copy
    }

    /// Puts an unsigned integer: its bit length in 7 raw bits, then the bits below its top bit.
    @inline(always)
    mutating func putUInt(_ value: UInt64) {
        var copy = self
        copy.writeUInt(value)
        self = copy
    }

    @inline(never)
    private mutating func writeWideBits(_ value: UInt64, _ bits: Int) {
        var remaining = bits
        while remaining > 0 {
            let k = min(RANSConstants.maxRawBits, remaining)
            remaining -= k
            putBits(value >> UInt64(remaining), k)
        }
    }

    @inline(never)
    private mutating func writeUInt(_ value: UInt64) {
        let length = 64 - value.leadingZeroBitCount
        putBits(UInt64(length), 7)
        if length > 1 { writeWideBits(value, length - 1) }
    }
}

/// Owns the scratch buffers of one batch's ops and emitted bytes, and codes the ops backwards.
/// A class only to own them; one per `BinaryBatchEncoder`, never shared.
final class RANSEncoder {
    /// Ops one command other than an opaque one can put: kind, time (symbol and a 64-bit uint:
    /// 1 + 1 + 3), stroke delta (1 + 2), tool and phase (2), two residual symbols, two signs and
    /// two mantissas of up to 32 bits (2 + 2 + 4): 18, rounded up. An opaque command adds one
    /// op per payload byte.
    static let maxOpsPerCommand = 32
    private var ops: UnsafeMutablePointer<UInt64>
    private var opCapacity: Int
    /// Bytes are emitted backwards from the end of this buffer (each op emits at most 3).
    private var emitted: UnsafeMutablePointer<UInt8>
    private var emittedCapacity: Int
    /// The model's encoder view, fetched once (a global's lazy-init check per batch otherwise).
    private let enc = BinaryModelPointers.shared.enc
    /// Scratch for the batch encoder's stroke context (see `BinaryBatchEncoder.encode`).
    let context = UnsafeMutablePointer<StrokeContext>.allocate(capacity: 1)
    /// The ops of the `put...` conveniences (tests and hand-built batches).
    private var pending: RANSOpWriter

    init() {
        opCapacity = 1024
        ops = .allocate(capacity: opCapacity)
        emittedCapacity = 3 * opCapacity + 8
        emitted = .allocate(capacity: emittedCapacity)
        pending = RANSOpWriter(ops: ops)
        context.initialize(to: .initial)
    }

    deinit {
        context.deallocate()
        ops.deallocate()
        emitted.deallocate()
    }

    /// A writer for a new batch with room for `capacity` ops.
    @inline(always)
    func begin(reserving capacity: Int) -> RANSOpWriter {
        var w = RANSOpWriter(ops: ops)
        reserve(&w, capacity)
        return w
    }

    /// Makes room for `more` ops after the writer's.
    @inline(always)
    func reserve(_ w: inout RANSOpWriter, _ more: Int) {
        // The writer is not passed to the slow path: a writer whose address escapes lives in
        // memory, and its count would be stored and reloaded on every op.
        if w.count &+ more > opCapacity { w.ops = grow(keeping: w.count, more) }
    }

    @inline(never)
    private func grow(keeping count: Int, _ more: Int) -> UnsafeMutablePointer<UInt64> {
        var capacity = opCapacity
        while capacity < count + more { capacity *= 2 }
        let bigger = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
        bigger.update(from: ops, count: count)
        ops.deallocate()
        ops = bigger
        opCapacity = capacity
        return bigger
    }

    // Conveniences that check capacity on every op (tests build batches by hand with these).
    func reset() { pending = RANSOpWriter(ops: ops) }
    func put(_ symbol: Int, _ table: BinaryTable) { reserve(&pending, 1); pending.put(symbol, table) }
    func putBits(_ value: UInt64, _ count: Int) { reserve(&pending, 1); pending.putBits(value, count) }
    func putWideBits(_ value: UInt64, _ count: Int) { reserve(&pending, 3); pending.putWideBits(value, count) }
    func putUInt(_ value: UInt64) { reserve(&pending, 4); pending.putUInt(value) }
    func finish(into out: inout [UInt8]) {
        let bytes = finish(pending)
        out.append(contentsOf: bytes)
    }

    /// Codes the writer's ops; returns the batch's bytes, in this encoder's scratch memory (valid
    /// until its next `finish`). The caller copies them where it wants them: into an array, or
    /// straight into its own buffer.
    func finish(_ w: RANSOpWriter) -> UnsafeBufferPointer<UInt8> {
        let opCount = w.count
        if emittedCapacity < 3 * opCount + 8 {
            emitted.deallocate()
            emittedCapacity = 3 * opCapacity + 8
            emitted = .allocate(capacity: emittedCapacity)
        }
        let enc = self.enc
        let ops = w.ops
        let emitted = self.emitted
        var position = emittedCapacity
        var x = UInt32(RANSConstants.initialState)
        var i = opCount
        while i > 0 {
            i &-= 1
            let op = ops[i]
            if op & RANSOpWriter.rawFlag != 0 {
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
        // The final state, big-endian: 4 bytes when bytes follow, else as few as needed (x is
        // never 0). One 4-byte store either way: the buffer has room for it below `position`
        // (3 bytes an op at most, 8 spare), and a short state's leading zero bytes are cut off.
        let stateBytes = position == emittedCapacity ? (32 &- x.leadingZeroBitCount &+ 7) >> 3 : 4
        UnsafeMutableRawPointer(emitted + position).storeBytes(of: x.bigEndian, toByteOffset: -4, as: UInt32.self)
        position &-= stateBytes
        return UnsafeBufferPointer(start: emitted + position, count: emittedCapacity &- position)
    }
}

/// Decodes what `RANSEncoder` wrote. Never reads outside `bytes`; every error is reported by the
/// caller's structural checks and the final-state check in `isCleanEnd`.
struct RANSDecoder {
    // Plain pointers rather than a buffer pointer: the hot loop then needs no standard-library
    // accessor (left uninlined in large functions, a call per byte). The next byte and the end
    // (not a base, a count and a position), and one pointer for both decoder tables: fewer
    // registers, so the coder state stays in one through the batch decoder's loop.
    private var x: UInt64
    private var next: UnsafePointer<UInt8>
    private let end: UnsafePointer<UInt8>
    private let tables: UnsafeRawPointer
    /// False once the input holds bytes where no encoder would have put them.
    private var isCanonical = true

    /// Nil when `bytes` is empty or its state is one no encoder produces.
    @inline(always)
    init?(_ raw: UnsafeRawBufferPointer) {
        self.init(raw, tables: BinaryModelPointers.shared.dec)
    }

    /// `init(_:)` with the model's decoder tables fetched by the caller once (reading the global
    /// costs a lazy-initialisation check every time, and live batches average 2.4 points).
    @inline(always)
    init?(_ raw: UnsafeRawBufferPointer, tables: UnsafeRawPointer) {
        guard let start = raw.baseAddress, raw.count > 0 else { return nil }
        let bytes = start.assumingMemoryBound(to: UInt8.self)
        let count = raw.count
        end = bytes + count
        self.tables = tables
        let stateBytes = count <= 4 ? count : 4
        var x: UInt64 = 0
        if stateBytes == 4 {
            x = UInt64(UInt32(bigEndian: raw.loadUnaligned(as: UInt32.self)))
        } else {
            for i in 0..<stateBytes { x = x << 8 | UInt64(bytes[i]) }
        }
        // Canonical form: a short state has no leading zero byte; a 4-byte state followed by
        // bytes is normalised (the encoder only emits bytes once its state reached the bound).
        guard x != 0, bytes[0] != 0 || count > 4 else { return nil }
        guard count <= 4 || x >= UInt64(RANSConstants.lowerBound) else { return nil }
        self.x = x
        next = bytes + stateBytes
    }

    /// Reads bytes while the state is below the bound and input remains. `xMax` is the
    /// encoder's emission threshold for the op just decoded: when the input runs out with the
    /// state still below the bound (the encoder's first emission), the encoder must have been at
    /// or above that threshold after the first byte read here, or these bytes are not canonical.
    @inline(always)
    private mutating func renormalise(xMax: UInt64) {
        guard x < UInt64(RANSConstants.lowerBound) && next < end else { return }
        x = x << 8 | UInt64(next.pointee)
        next += 1
        let first = x
        while x < UInt64(RANSConstants.lowerBound) && next < end {
            x = x << 8 | UInt64(next.pointee)
            next += 1
        }
        if x < UInt64(RANSConstants.lowerBound) && first < xMax { isCanonical = false }
    }

    @inline(always)
    mutating func get(_ table: BinaryTable) -> Int {
        let slot = Int(truncatingIfNeeded: x) & Int(BinaryModel.total - 1)
        let symbol = Int(truncatingIfNeeded: tables.load(
            fromByteOffset: BinaryModel.lutOffset &+ table.id &* Int(BinaryModel.total) &+ slot, as: UInt8.self))
        let fs = UInt64(tables.load(fromByteOffset: (table.base &+ symbol) &* 4, as: UInt32.self))
        x = (fs & 0xFFFF) &* (x >> UInt64(BinaryModel.scaleBits)) &+ UInt64(slot) &- (fs >> 16)
        renormalise(xMax: (fs & 0xFFFF) << (32 - UInt64(BinaryModel.scaleBits)))
        return symbol
    }

    /// A residual magnitude symbol's smallest magnitude << 8 | its count of extra raw bits
    /// (`BinaryPrediction.extraBits`): one load instead of the arithmetic.
    @inline(always)
    func magnitude(_ symbol: Int) -> UInt64 {
        tables.load(fromByteOffset: BinaryModel.magnitudeOffset &+ symbol &* 8, as: UInt64.self)
    }

    /// Reads `count` (0...23) raw bits.
    @inline(always)
    mutating func getBits(_ bits: Int) -> UInt64 {
        if bits == 0 { return 0 }
        let value = x & ((1 << UInt64(bits)) &- 1)
        x >>= UInt64(bits)
        renormalise(xMax: 1 << (32 - UInt64(bits)))
        return value
    }

    // The multi-chunk reads are rare (large residuals, ids, lengths): they run out of line on a
    // copy, so that the caller's decoder never has its address taken and stays in registers.

    /// Reads any number (0...64) of raw bits, most significant chunk first.
    @inline(always)
    mutating func getWideBits(_ bits: Int) -> UInt64 {
        var copy = self
        let value = copy.readWideBits(bits)
        self = copy
        return value
    }

    /// Reads an unsigned integer (`RANSOpWriter.putUInt`); nil when the bit length is above 64.
    @inline(always)
    mutating func getUInt() -> UInt64? {
        var copy = self
        let value = copy.readUInt()
        self = copy
        return value
    }

    @inline(never)
    private mutating func readWideBits(_ bits: Int) -> UInt64 {
        var value: UInt64 = 0
        var remaining = bits
        while remaining > 0 {
            let k = min(RANSConstants.maxRawBits, remaining)
            remaining -= k
            value = value << UInt64(k) | getBits(k)
        }
        return value
    }

    @inline(never)
    private mutating func readUInt() -> UInt64? {
        let length = Int(getBits(7))
        if length == 0 { return 0 }
        if length > 64 { return nil }
        return (1 << UInt64(length - 1)) | readWideBits(length - 1)
    }

    /// True when every byte was consumed and the state is back where the encoder began: the end
    /// of the batch (no op that has a successor can leave the state there, see `BinaryBatchDecoder`).
    var isAtEnd: Bool { next == end && x == RANSConstants.initialState }

    /// `isAtEnd`, and every byte was where an encoder would have put it.
    var isCleanEnd: Bool { next == end && x == RANSConstants.initialState && isCanonical }
}
