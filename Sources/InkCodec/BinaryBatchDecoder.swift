// Decoder of the compact binary codec: bytes -> Batch, against a BinaryCodecState.

extension BinaryBatchCodec {
    /// Decodes one batch and advances `state`. On error `state` is unchanged.
    public static func decode(_ bytes: [UInt8], state: inout BinaryCodecState) throws(BinaryCodecError) -> Batch {
        var commands: [TimedCommand] = []
        let result = bytes.withUnsafeBytes { raw -> Result<AuthorID, BinaryCodecError> in
            do throws(BinaryCodecError) {
                return .success(try BinaryBatchDecoder.decode(raw, state: &state, into: &commands))
            } catch {
                return .failure(error)
            }
        }
        let author = try result.get()
        return Batch(author: author, commands: commands)
    }
}

extension BinaryBatchCodec {
    /// Whether `bytes` start a self-contained batch (one that resets the codec state: a history
    /// chunk or a resync point). Reads only the header; false for anything that is not a batch.
    public static func isSelfContained(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            guard var d = RANSDecoder(raw) else { return false }
            return d.get(.header) == 2
        }
    }
}

public enum BinaryBatchDecoder {
    /// Decodes one batch from `bytes`, appends its commands to `commands` and returns its author.
    /// On error `state` is unchanged and `commands` is restored to its previous length.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, state: inout BinaryCodecState, into commands: inout [TimedCommand]
    ) throws(BinaryCodecError) -> AuthorID {
        let before = commands.count
        do {
            return try decodeUnchecked(bytes, state: &state, into: &commands)
        } catch {
            commands.removeSubrange(before...)
            throw error
        }
    }

    /// Decodes one batch from `bytes` into the uninitialised memory of `buffer`, from its start;
    /// returns its author and how many commands it initialised there (the caller then owns them).
    /// A batch with more commands than `buffer` holds throws `tooManyCommands` (a buffer of
    /// `Batch.maxCommands` always suffices). On error `state` is unchanged and `buffer` holds no
    /// initialised command. For a receiver that reuses its own buffer: no array append a command.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, state: inout BinaryCodecState,
        into buffer: UnsafeMutableBufferPointer<TimedCommand>
    ) throws(BinaryCodecError) -> (author: AuthorID, count: Int) {
        var cursor = BinaryCommandCursor(buffer)
        let start = cursor.next
        do {
            let author = try decodeUnchecked(bytes, state: &state, into: &cursor)
            // Unsigned: a shift, where a signed pointer distance divides with rounding.
            let bytes = UInt(bitPattern: UnsafeRawPointer(cursor.next) - UnsafeRawPointer(start))
            return (author, Int(bitPattern: bytes / UInt(MemoryLayout<TimedCommand>.stride)))
        } catch {
            start.deinitialize(count: cursor.next - start)
            throw error
        }
    }

    // Inlined into each entry point: a call, its frame and the sink's round trip through memory
    // cost ~15 instructions a batch (2.4 points).
    @inline(always)
    private static func decodeUnchecked<Sink: BinaryCommandSink>(
        _ bytes: UnsafeRawBufferPointer, state: inout BinaryCodecState, into commands: inout Sink
    ) throws(BinaryCodecError) -> AuthorID {
        guard !bytes.isEmpty, bytes.count <= BinaryBatchCodec.maxBatchBytes else { throw .badLength(bytes.count) }
        guard var d = RANSDecoder(bytes, tables: state.model.dec) else { throw .badState }
        let header = d.get(.header)
        let author: AuthorID
        switch header {
        case 0:
            guard let last = state.lastAuthor else { throw .missingContext }
            author = last
        case 1, 2:
            guard let raw = d.getUInt(), raw <= UInt64(UInt32.max) else { throw .badField }
            author = AuthorID(UInt32(raw))
            // Canonical form: the previous batch's author is never named again.
            if header == 1 && state.lastAuthor == author { throw .badField }
        default:
            throw .unsupportedHeader(header)
        }
        // The context is copied straight from the state into this variable and committed from
        // it (a returned context took a detour through a stack temporary).
        // Read from the state even for a self-contained batch and then replaced: two branches
        // that each produce a context copied it twice (through a stack temporary).
        var context = state.readContext(of: author)
        if header == 2 { context = .initial }
        try decodeCommands(&d, bytes.count, &context, into: &commands)
        if header == 2 { state.reset() }
        state.commit(contextAt: &context, author: author)
        return author
    }

    /// The batch's commands after its header, against the author's context at `context`.
    @inline(always)
    private static func decodeCommands<Sink: BinaryCommandSink>(
        _ coder: inout RANSDecoder, _ byteCount: Int, _ context: inout StrokeContext,
        into commands: inout Sink
    ) throws(BinaryCodecError) {
        var d = coder
        var opaqueBudget = UInt64(byteCount)
        var decoded = 0
        // No symbol marks the end: the batch ends where its bytes do, with the coder back in its
        // initial state (every command's kind symbol moves the state away from it).
        var kind = -1  // a kind symbol already read by a run of moves, else -1
        while true {
            if kind < 0 {
                if d.isAtEnd { break }
                kind = d.get(.kind(context.kindContext))
                decoded &+= 1  // at most maxCommands + 1: no overflow
                guard decoded <= Batch.maxCommands else { throw .tooManyCommands }
            }
            if kind == BinaryKind.moveNextFrame && context.kindContext == 3 {
                // The common case has its own loop (BinaryMoveRun); on a copy, so that the coder's
                // address does not escape here.
                var run = d
                kind = try BinaryMoveRun.decode(&run, &context, &decoded, into: &commands)
                // Most batches end in a run: then the run has checked the end and the coder,
                // which nothing reads any more, stays in the run.
                if kind == BinaryMoveRun.cleanEnd { return }
                d = run
                continue
            }
            let command: TimedCommand
            if kind <= BinaryKind.startEraser && kind != BinaryKind.reserved || kind == BinaryKind.moveNextFrame {
                command = try decodeSimplePoint(kind, &d, &context)
            } else {
                // A copy goes to the rare kinds: a coder whose address escapes lives in memory,
                // and its state would be stored and reloaded on every op.
                var rare = d
                command = try decodeCommand(kind, &rare, &context, &opaqueBudget)
                d = rare
            }
            guard commands.put(command) else { throw .tooManyCommands }
            kind = -1
        }
        guard d.isCleanEnd else { throw .corrupt }
        coder = d
    }

    /// The points that need no stroke id (kinds 1, 2, 15: a move or end of the open stroke;
    /// 3, 4: the start of the next stroke): nearly every command. A move or end always continues
    /// the context's stroke (same stroke, not a start, and an open stroke has at least one
    /// remembered point); a start begins a new history, predicted from the anchor.
    @inline(always)
    private static func decodeSimplePoint(
        _ kind: Int, _ d: inout RANSDecoder, _ context: inout StrokeContext
    ) throws(BinaryCodecError) -> TimedCommand {
        let t: UInt64
        var timeSymbol = 1
        if kind == BinaryKind.moveNextFrame {
            guard context.frame != UInt64.max else { throw .badTime }
            t = BinaryPrediction.gridTime(context.frame + 1)
            guard t < BinaryPrediction.gridLimitMs else { throw .badTime }
            context.setTime(t, frame: context.frame + 1)
        } else {
            (t, timeSymbol) = try getTime(group: kind == BinaryKind.move ? 0 : (kind == BinaryKind.end ? 1 : 2), &d, &context)
            // One frame after the previous command is always `moveNextFrame` (canonical form).
            if kind == BinaryKind.move && timeSymbol == 1 { throw .badTime }
        }
        let starts = kind == BinaryKind.startPen || kind == BinaryKind.startEraser
        if !starts && !context.isOpen { throw .badField }
        let (x, y) = try decodeCoordinates(
            count: starts ? 0 : context.count, timeSymbol: timeSymbol, &d, xs: context.xs, ys: context.ys,
            anchorX: context.anchorX, anchorY: context.anchorY)
        let p: StrokePoint
        if starts {
            p = StrokePoint(
                stroke: StrokeID(context.stroke.rawValue &+ 1), tool: kind == BinaryKind.startPen ? .pen : .eraser,
                phase: .start, x: x, y: y)
        } else {
            p = StrokePoint(stroke: context.stroke, tool: context.tool, phase: kind == BinaryKind.end ? .end : .move, x: x, y: y)
        }
        context.record(p, continues: !starts)
        return TimedCommand(timeMs: t, command: .point(p))
    }

    /// A point's coordinates: residual symbols, signs and mantissas against the prediction from
    /// `n` remembered points (0: the anchor). Takes the context's points rather than the context:
    /// a context passed by value was copied field by field on every point.
    @inline(always)
    private static func decodeCoordinates(
        count n: Int, timeSymbol: Int, _ d: inout RANSDecoder, xs: (Int32, Int32, Int32), ys: (Int32, Int32, Int32),
        anchorX: Int32, anchorY: Int32
    ) throws(BinaryCodecError) -> (Int32, Int32) {
        let c = BinaryPrediction.timeClass(timeSymbol)
        let base = BinaryPrediction.residualBase(count: n, timeClass: c)
        let px = n == 0 ? Int64(anchorX) : BinaryPrediction.predict(xs, count: n, timeClass: c)
        let py = n == 0 ? Int64(anchorY) : BinaryPrediction.predict(ys, count: n, timeClass: c)
        let sx = d.get(.residual(base))
        let sy = d.get(.residual(base + 1))
        let mx = d.magnitude(sx)
        let my = d.magnitude(sy)
        var bx = Int(truncatingIfNeeded: mx & 0xFF)
        var by = Int(truncatingIfNeeded: my & 0xFF)
        var signX: UInt64 = 0
        var signY: UInt64 = 0
        let modelledSigns = n < BinaryPrediction.signModelledBelow
        if modelledSigns {
            let signs = 4 * n
            if sx != 0 {
                signX = UInt64(d.get(.sign(signs)))
                bx -= 1
            }
            if sy != 0 {
                signY = UInt64(d.get(.sign(signs + 1 + (sx == 0 ? 0 : 1 + Int(signX)))))
                by -= 1
            }
        }
        var ex: UInt64
        var ey: UInt64
        if bx + by <= RANSConstants.maxRawBits {
            let both = d.getBits(bx + by)
            ex = both >> UInt64(by)
            ey = both & ((1 << UInt64(by)) - 1)
        } else {
            ex = d.getWideBits(bx)
            ey = d.getWideBits(by)
        }
        if modelledSigns {
            ex = ex << 1 | signX
            ey = ey << 1 | signY
        }
        // A prediction is an Int32 and a residual below 2^34 in magnitude: no Int64 overflow.
        guard let x = Int32(exactly: px &+ BinaryPrediction.residual(magnitude: mx, extra: ex)),
              let y = Int32(exactly: py &+ BinaryPrediction.residual(magnitude: my, extra: ey)) else { throw .coordinateOutOfRange }
        return (x, y)
    }

    @inline(never)
    private static func decodeCommand(
        _ kind: Int, _ d: inout RANSDecoder, _ context: inout StrokeContext, _ opaqueBudget: inout UInt64
    ) throws(BinaryCodecError) -> TimedCommand {
        switch kind {
        case BinaryKind.point:
            // Kinds 1-4 and 15 take `decodeSimplePoint`; this is any other point.
            let (t, timeSymbol) = try getTime(group: 2, &d, &context)
            let stroke = try getStrokeDelta(&d, context)
            let tool: Tool = d.getBits(1) == 0 ? .pen : .eraser
            guard let phase = StrokePhase(rawValue: UInt8(d.getBits(2))) else { throw .badField }
            let continues = context.continues(stroke: stroke, phase: phase)
            // Canonical form: what a shorter kind expresses must use it.
            if context.isOpen && continues && tool == context.tool { throw .badField }
            if phase == .start && stroke.rawValue == context.stroke.rawValue &+ 1 { throw .badField }
            let (x, y) = try decodeCoordinates(
                count: continues ? context.count : 0, timeSymbol: timeSymbol, &d, xs: context.xs, ys: context.ys,
                anchorX: context.anchorX, anchorY: context.anchorY)
            let p = StrokePoint(stroke: stroke, tool: tool, phase: phase, x: x, y: y)
            context.record(p, continues: continues)
            return TimedCommand(timeMs: t, command: .point(p))
        case BinaryKind.penStyle:
            let t = try getTime(group: 3, &d, &context).0
            let color = UInt8(d.getBits(3))
            let width = UInt8(d.getBits(2))
            guard let style = PenStyle(color: color, width: width) else { throw .badField }
            return TimedCommand(timeMs: t, command: .penStyle(style))
        case BinaryKind.undo, BinaryKind.redo:
            let t = try getTime(group: 3, &d, &context).0
            let s = try getStrokeDelta(&d, context)
            return TimedCommand(timeMs: t, command: kind == BinaryKind.undo ? .undo(s) : .redo(s))
        case BinaryKind.clear:
            let t = try getTime(group: 3, &d, &context).0
            return TimedCommand(timeMs: t, command: .clear)
        case BinaryKind.erase:
            let t = try getTime(group: 3, &d, &context).0
            let a = try getUInt32(&d)
            let s = try getUInt32(&d)
            return TimedCommand(timeMs: t, command: .erase(StrokeRef(author: AuthorID(a), stroke: StrokeID(s))))
        case BinaryKind.addPage, BinaryKind.switchPage:
            let t = try getTime(group: 3, &d, &context).0
            let page = PageID(try getUInt32(&d))
            return TimedCommand(timeMs: t, command: kind == BinaryKind.addPage ? .addPage(page) : .switchPage(page))
        case BinaryKind.room:
            let t = try getTime(group: 3, &d, &context).0
            let room: RoomCommand
            switch d.getBits(2) {
            case 0: room = .lock
            case 1: room = .unlock
            case 2: room = .presentPage(PageID(try getUInt32(&d)))
            default: throw .badField
            }
            return TimedCommand(timeMs: t, command: .room(room))
        case BinaryKind.opaque:
            let t = try getTime(group: 3, &d, &context).0
            let code = CommandKind(rawValue: UInt8(d.getBits(8)))
            guard let length = d.getUInt() else { throw .badField }
            // Raw bytes cost their full size in the coder, so a valid payload never exceeds
            // the input: this bounds the work and memory a hostile batch can cause.
            guard length <= UInt64(BinaryBatchCodec.maxOpaqueBytes), length <= opaqueBudget else {
                throw .payloadTooLarge(length)
            }
            opaqueBudget -= length
            var payload: [UInt8] = []
            payload.reserveCapacity(Int(length))
            for _ in 0..<Int(length) { payload.append(UInt8(d.getBits(8))) }
            if code == .background {
                guard let background = PageBackground(payload: payload) else { throw .badField }
                return TimedCommand(timeMs: t, command: .background(background))
            }
            return TimedCommand(timeMs: t, command: .unknown(kind: code, payload: payload))
        default:
            throw .reservedKind(kind)
        }
    }

    @inline(always)
    private static func getTime(
        group: Int, _ d: inout RANSDecoder, _ context: inout StrokeContext
    ) throws(BinaryCodecError) -> (UInt64, Int) {
        let symbol = d.get(.time(group))
        let t: UInt64
        if symbol <= BinaryPrediction.largeFramesSymbol {
            guard context.frame != UInt64.max else { throw .badTime }
            var frames = UInt64(symbol)
            if symbol == BinaryPrediction.largeFramesSymbol {
                guard let extra = d.getUInt(), extra < BinaryPrediction.gridLimitMs else { throw .badTime }
                frames = extra + UInt64(BinaryPrediction.directFrames)
            }
            let frame = context.frame + frames
            t = BinaryPrediction.gridTime(frame)
            guard t < BinaryPrediction.gridLimitMs else { throw .badTime }
            context.setTime(t, frame: frame)
        } else if symbol == BinaryPrediction.offGridSymbol {
            guard let z = d.getUInt() else { throw .badTime }
            let previous = context.timeMs
            t = previous &+ UInt64(bitPattern: BinaryPrediction.unzigzag(z))
            let previousOnGrid = context.frame != UInt64.max
            context.setTime(t)
            // The encoder uses the grid whenever it can; anything else is not canonical.
            if t >= previous && previousOnGrid && context.frame != UInt64.max { throw .badTime }
        } else {
            throw .badTime
        }
        return (t, symbol)
    }

    private static func getStrokeDelta(_ d: inout RANSDecoder, _ context: StrokeContext) throws(BinaryCodecError) -> StrokeID {
        guard let z = d.getUInt(), z <= UInt64(UInt32.max) else { throw .badField }
        let delta = Int32(truncatingIfNeeded: BinaryPrediction.unzigzag(z))
        return StrokeID(context.stroke.rawValue &+ UInt32(bitPattern: delta))
    }

    private static func getUInt32(_ d: inout RANSDecoder) throws(BinaryCodecError) -> UInt32 {
        guard let v = d.getUInt(), v <= UInt64(UInt32.max) else { throw .badField }
        return UInt32(v)
    }
}
