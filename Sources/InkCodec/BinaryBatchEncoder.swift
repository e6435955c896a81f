// Encoder of the compact binary codec: Batch -> bytes, against a BinaryCodecState.

/// Kind symbols (docs/protocol.md section 2.1). 0 and 16...19 are reserved (a batch ends where
/// its bytes do, so no symbol marks the end; 0 keeps slot 0 of every kind table unused).
enum BinaryKind {
    static let reserved = 0, move = 1, end = 2, startPen = 3, startEraser = 4, point = 5
    static let penStyle = 6, undo = 7, redo = 8, clear = 9, erase = 10, addPage = 11
    static let switchPage = 12, room = 13, opaque = 14
    /// A move exactly one 60 Hz frame after the previous command: no time symbol follows.
    static let moveNextFrame = 15
}

/// Bounds and entry points of the compact binary codec.
public enum BinaryBatchCodec {
    /// Largest encoded batch, in bytes (decoders reject longer input).
    public static let maxBatchBytes = 1 << 22
    /// Largest payload of an unknown-kind command, in bytes.
    public static let maxOpaqueBytes = 1 << 16

    /// Most bytes a batch of `commands` commands without opaque ones encodes to: each command
    /// puts at most `RANSEncoder.maxOpsPerCommand` ops (the header counts as one), each op
    /// emits at most 3 bytes, plus the final state's 4. An opaque command adds at most its
    /// payload's byte count (a raw 8-bit op emits at most one byte).
    public static func maxEncodedBytes(commands: Int) -> Int {
        (commands + 1) * RANSEncoder.maxOpsPerCommand * 3 + 4
    }

    /// Encodes `batch` against `state` and advances `state`. With `selfContained` the batch
    /// resets the state first, so it decodes with a fresh `BinaryCodecState`.
    /// On error `state` is unchanged.
    public static func encode(
        _ batch: Batch, state: inout BinaryCodecState, selfContained: Bool = false
    ) throws(BinaryCodecError) -> [UInt8] {
        var encoder = BinaryBatchEncoder()
        var out: [UInt8] = []
        try encoder.encode(batch, state: &state, selfContained: selfContained, into: &out)
        return out
    }
}

/// Reusable encoder (keeps its scratch buffers between batches).
public struct BinaryBatchEncoder {
    private let coder = RANSEncoder()

    public init() {}

    /// Appends the encoding of `batch` to `out` and advances `state`; returns the byte count.
    /// On error neither `state` nor `out` changes.
    @discardableResult
    public mutating func encode(
        _ batch: Batch, state: inout BinaryCodecState, selfContained: Bool = false, into out: inout [UInt8]
    ) throws(BinaryCodecError) -> Int {
        let bytes = try code(batch, state: &state, selfContained: selfContained)
        out.append(contentsOf: bytes)
        commit(batch.author, to: &state, selfContained: selfContained)
        return bytes.count
    }

    /// Writes the encoding of `batch` at the start of `buffer` and advances `state`; returns the
    /// byte count. The path of a sender that fills its own datagram or chunk buffer: no array.
    /// Throws `batchTooLarge` when the bytes do not fit `buffer` (a buffer of
    /// `BinaryBatchCodec.maxEncodedBytes(commands:)` bytes always fits a batch without opaque
    /// commands). On error neither `state` nor `buffer` changes.
    public mutating func encode(
        _ batch: Batch, state: inout BinaryCodecState, selfContained: Bool = false,
        into buffer: UnsafeMutableRawBufferPointer
    ) throws(BinaryCodecError) -> Int {
        let bytes = try code(batch, state: &state, selfContained: selfContained)
        guard bytes.count <= buffer.count, let destination = buffer.baseAddress else { throw .batchTooLarge }
        BinaryBatchEncoder.copy(bytes, to: destination)
        commit(batch.author, to: &state, selfContained: selfContained)
        return bytes.count
    }

    /// Copies a batch's bytes to `destination`. A live batch is about 9 bytes: two overlapping
    /// 8- or 4-byte moves cost less than a memcpy call and its set-up (~15 instructions a batch).
    @inline(always)
    private static func copy(_ bytes: UnsafeBufferPointer<UInt8>, to destination: UnsafeMutableRawPointer) {
        let n = bytes.count
        let source = UnsafeRawPointer(bytes.baseAddress!)
        if n >= 8 && n <= 16 {
            let head = source.loadUnaligned(as: UInt64.self)
            let tail = source.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
            destination.storeBytes(of: head, as: UInt64.self)
            destination.storeBytes(of: tail, toByteOffset: n &- 8, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            let head = source.loadUnaligned(as: UInt32.self)
            let tail = source.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)
            destination.storeBytes(of: head, as: UInt32.self)
            destination.storeBytes(of: tail, toByteOffset: n &- 4, as: UInt32.self)
        } else {
            destination.copyMemory(from: source, byteCount: n)
        }
    }

    /// Advances `state` past the batch just coded (its author's context is in `coder.context`).
    @inline(always)
    private func commit(_ author: AuthorID, to state: inout BinaryCodecState, selfContained: Bool) {
        if selfContained { state.reset() }
        state.commit(contextAt: coder.context, author: author)
    }

    /// Codes `batch` against `state` without changing it (inout only to avoid a copy); returns the bytes (in the coder's
    /// scratch memory) and leaves the author's new context in `coder.context`.
    @inline(always)
    private func code(
        _ batch: Batch, state: inout BinaryCodecState, selfContained: Bool
    ) throws(BinaryCodecError) -> UnsafeBufferPointer<UInt8> {
        guard batch.commands.count <= Batch.maxCommands else { throw .tooManyCommands }
        var w = coder.begin(reserving: RANSEncoder.maxOpsPerCommand)
        let reset = selfContained
        if reset {
            w.put(2, .header)
            w.putUInt(UInt64(batch.author.rawValue))
        } else if state.lastAuthor == batch.author {
            w.put(0, .header)
        } else {
            w.put(1, .header)
            w.putUInt(UInt64(batch.author.rawValue))
        }
        // The context lives in the coder's memory, not in registers: a loop-carried context in
        // registers cost more in copies (the point history shifts every point) than it saved.
        let context = coder.context
        if reset {
            context.pointee = StrokeContext.initial
        } else {
            state.copyContext(of: batch.author, to: context)
        }
        let commands = batch.commands
        var i = 0
        while i < commands.count {
            if context.pointee.kindContext == 3 {
                // The common case, a run of next-frame moves, has its own loop (BinaryMoveRun).
                coder.reserve(&w, (commands.count - i) * BinaryMoveRun.maxOpsPerPoint)
                var run = w
                i = BinaryMoveRun.encode(commands, from: i, &context.pointee, &run)
                w = run
                if i == commands.count { break }
            }
            // Room for one command (an opaque payload reserves its own bytes).
            coder.reserve(&w, RANSEncoder.maxOpsPerCommand)
            try put(commands[i], &context.pointee, &w)
            i += 1
        }
        let bytes = coder.finish(w)
        guard bytes.count <= BinaryBatchCodec.maxBatchBytes else { throw .batchTooLarge }
        return bytes
    }

    @inline(always)
    private func put(
        _ timed: TimedCommand, _ context: inout StrokeContext, _ w: inout RANSOpWriter
    ) throws(BinaryCodecError) {
        let kindTable = BinaryTable.kind(context.kindContext)
        switch timed.command {
        case .point(let p):
            let continues = context.continues(stroke: p.stroke, phase: p.phase)
            var kind = BinaryKind.point
            if context.isOpen && continues && p.tool == context.tool && p.phase != .start {
                kind = p.phase == .move ? BinaryKind.move : BinaryKind.end
            } else if p.phase == .start && p.stroke.rawValue == context.stroke.rawValue &+ 1 {
                kind = p.tool == .pen ? BinaryKind.startPen : BinaryKind.startEraser
            }
            let group = kind == BinaryKind.move ? 0 : (kind == BinaryKind.end ? 1 : 2)
            let (timeSymbol, frame) = timeSymbolFor(timed.timeMs, context)
            if kind == BinaryKind.move && timeSymbol == 1 {
                w.put(BinaryKind.moveNextFrame, kindTable)
                context.setTime(timed.timeMs, frame: frame)
            } else {
                w.put(kind, kindTable)
                putTime(timed.timeMs, group: group, &context, &w)
            }
            if kind == BinaryKind.point {
                let delta = Int32(bitPattern: p.stroke.rawValue &- context.stroke.rawValue)
                w.putUInt(BinaryPrediction.zigzag(Int64(delta)))
                w.putBits(p.tool == .pen ? 0 : 1, 1)
                w.putBits(UInt64(p.phase.rawValue), 2)
            }
            let c = BinaryPrediction.timeClass(timeSymbol)
            let n = continues ? context.count : 0
            let base = BinaryPrediction.residualBase(count: n, timeClass: c)
            let px = n == 0 ? Int64(context.anchorX) : BinaryPrediction.predict(context.xs, count: n, timeClass: c)
            let py = n == 0 ? Int64(context.anchorY) : BinaryPrediction.predict(context.ys, count: n, timeClass: c)
            let (sx, ex, bx) = BinaryPrediction.residualSymbol(Int64(p.x) - px)
            let (sy, ey, by) = BinaryPrediction.residualSymbol(Int64(p.y) - py)
            w.put(sx, .residual(base))
            w.put(sy, .residual(base + 1))
            if n < BinaryPrediction.signModelledBelow {
                // The first points' signs follow the stroke's direction: coded with a model, so
                // only the mantissas stay raw.
                let signs = 4 * n
                if sx != 0 { w.put(Int(ex & 1), .sign(signs)) }
                if sy != 0 { w.put(Int(ey & 1), .sign(signs + 1 + (sx == 0 ? 0 : 1 + Int(ex & 1)))) }
                putPair(ex >> 1, bx == 0 ? 0 : bx - 1, ey >> 1, by == 0 ? 0 : by - 1, &w)
            } else {
                putPair(ex, bx, ey, by, &w)
            }
            context.record(p, continues: continues)
        case .penStyle(let style):
            w.put(BinaryKind.penStyle, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
            w.putBits(UInt64(style.color), 3)
            w.putBits(UInt64(style.width), 2)
        case .undo(let s):
            w.put(BinaryKind.undo, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
            putStrokeDelta(s, context, &w)
        case .redo(let s):
            w.put(BinaryKind.redo, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
            putStrokeDelta(s, context, &w)
        case .clear:
            w.put(BinaryKind.clear, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
        case .erase(let ref):
            w.put(BinaryKind.erase, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
            w.putUInt(UInt64(ref.author.rawValue))
            w.putUInt(UInt64(ref.stroke.rawValue))
        case .addPage(let page):
            w.put(BinaryKind.addPage, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
            w.putUInt(UInt64(page.rawValue))
        case .switchPage(let page):
            w.put(BinaryKind.switchPage, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
            w.putUInt(UInt64(page.rawValue))
        case .room(let room):
            w.put(BinaryKind.room, kindTable)
            putTime(timed.timeMs, group: 3, &context, &w)
            switch room {
            case .lock: w.putBits(0, 2)
            case .unlock: w.putBits(1, 2)
            case .presentPage(let page):
                w.putBits(2, 2)
                w.putUInt(UInt64(page.rawValue))
            }
        case .background(let background):
            try putOpaque(kind: .background, payload: background.payload, timeMs: timed.timeMs, kindTable, &context, &w)
        case .unknown(let kind, let payload):
            try putOpaque(kind: kind, payload: payload, timeMs: timed.timeMs, kindTable, &context, &w)
        }
    }

    /// Kind 14: a command kind number and its payload as raw bytes (unknown kinds, backgrounds).
    @inline(always)
    private func putOpaque(
        kind: CommandKind, payload: [UInt8], timeMs: UInt64, _ kindTable: BinaryTable,
        _ context: inout StrokeContext, _ w: inout RANSOpWriter
    ) throws(BinaryCodecError) {
        guard payload.count <= BinaryBatchCodec.maxOpaqueBytes else {
            throw .payloadTooLarge(UInt64(payload.count))
        }
        coder.reserve(&w, payload.count + RANSEncoder.maxOpsPerCommand)
        w.put(BinaryKind.opaque, kindTable)
        putTime(timeMs, group: 3, &context, &w)
        w.putBits(UInt64(kind.rawValue), 8)
        w.putUInt(UInt64(payload.count))
        for byte in payload { w.putBits(UInt64(byte), 8) }
    }

    /// Two raw fields, as one when together at most 23 bits.
    @inline(always)
    private func putPair(_ a: UInt64, _ aBits: Int, _ b: UInt64, _ bBits: Int, _ w: inout RANSOpWriter) {
        if aBits + bBits <= RANSConstants.maxRawBits {
            w.putBits(a << UInt64(bBits) | b, aBits + bBits)
        } else {
            w.putWideBits(a, aBits)
            w.putWideBits(b, bBits)
        }
    }

    /// The time symbol of `t` after the context's time (frames on the 60 Hz grid when both lie
    /// on it), and the frame of `t` (`UInt64.max` when off the grid).
    @inline(always)
    private func timeSymbolFor(_ t: UInt64, _ context: StrokeContext) -> (Int, UInt64) {
        // Most commands come one frame after the previous one: that check needs one division,
        // the general case two (a previous time off the grid wraps `nextFrame` to 0).
        let nextFrame = context.frame &+ 1
        if nextFrame != 0 && t == BinaryPrediction.gridTime(nextFrame) && t < BinaryPrediction.gridLimitMs {
            return (1, nextFrame)
        }
        guard BinaryPrediction.isOnGrid(t) else { return (BinaryPrediction.offGridSymbol, UInt64.max) }
        let frame = BinaryPrediction.frame(t)
        guard context.frame != UInt64.max, t >= context.timeMs else { return (BinaryPrediction.offGridSymbol, frame) }
        let frames = frame - context.frame
        return (frames < UInt64(BinaryPrediction.directFrames) ? Int(frames) : BinaryPrediction.largeFramesSymbol, frame)
    }

    /// Codes the command's time against the author's previous one; returns the time symbol.
    @discardableResult
    @inline(always)
    private func putTime(_ t: UInt64, group: Int, _ context: inout StrokeContext, _ w: inout RANSOpWriter) -> Int {
        let (symbol, frame) = timeSymbolFor(t, context)
        w.put(symbol, .time(group))
        if symbol == BinaryPrediction.largeFramesSymbol {
            w.putUInt(frame - context.frame - UInt64(BinaryPrediction.directFrames))
        } else if symbol == BinaryPrediction.offGridSymbol {
            w.putUInt(BinaryPrediction.zigzag(Int64(bitPattern: t &- context.timeMs)))
        }
        context.setTime(t, frame: frame)
        return symbol
    }

    private func putStrokeDelta(_ s: StrokeID, _ context: StrokeContext, _ w: inout RANSOpWriter) {
        let delta = Int32(bitPattern: s.rawValue &- context.stroke.rawValue)
        w.putUInt(BinaryPrediction.zigzag(Int64(delta)))
    }
}
