// The compact binary codec's common case on its own: a run of moves of the open stroke, each one
// 60 Hz frame after the previous command, with three remembered points (kind 15 under table
// K[3]; about three points in four of a live trace). Same symbols and bytes as the general path
// (docs/protocol.md 2.1); a separate small loop keeps the stroke's last points, the frame and the
// coder in registers instead of spilling them around the general path's every branch.

enum BinaryMoveRun {
    /// Residual tables of these points: three remembered points, time class 0 (one frame).
    private static let residualBase = BinaryPrediction.residualBase(count: 3, timeClass: 0)

    /// Ops one point of a run puts at most: kind, two residual symbols, two mantissas of up to
    /// 30 bits with their signs (two chunks each when they do not fit one field together).
    static let maxOpsPerPoint = 7

    /// What `decode` returns when the batch ended cleanly inside the run.
    static let cleanEnd = -2

    /// The first frame whose grid time is not below `BinaryPrediction.gridLimitMs`: the run
    /// checks its frame against it instead of computing and checking the time.
    private static let gridFrameLimit: UInt64 = 65_970_697_667

    /// Encodes the commands from `start` on while they belong to the run (the context has an open
    /// stroke with three remembered points); returns the index of the first command that does not
    /// (`start` when none does). The writer needs room for `maxOpsPerPoint` ops per command.
    @inline(never)
    static func encode(
        _ commands: [TimedCommand], from start: Int, _ context: inout StrokeContext, _ w: inout RANSOpWriter
    ) -> Int {
        var frame = context.frame
        var (x1, x2, x3) = context.xs
        var (y1, y2, y3) = context.ys
        let stroke = context.stroke
        let tool = context.tool
        var t = context.timeMs
        var writer = w
        let kindTable = BinaryTable.kind(3)
        var i = start
        while i < commands.count {
            let timed = commands[i]
            guard case .point(let p) = timed.command, p.phase == .move, p.stroke == stroke, p.tool == tool else { break }
            // One frame after the previous command (a previous time off the grid wraps to 0).
            let nextFrame = frame &+ 1
            guard nextFrame != 0, timed.timeMs == BinaryPrediction.gridTime(nextFrame),
                  timed.timeMs < BinaryPrediction.gridLimitMs else { break }
            frame = nextFrame
            t = timed.timeMs
            writer.put(BinaryKind.moveNextFrame, kindTable)
            let px = BinaryPrediction.predict((x1, x2, x3), count: 3, timeClass: 0)
            let py = BinaryPrediction.predict((y1, y2, y3), count: 3, timeClass: 0)
            let (sx, ex, bx) = BinaryPrediction.residualSymbol(Int64(p.x) &- px)
            let (sy, ey, by) = BinaryPrediction.residualSymbol(Int64(p.y) &- py)
            writer.put(sx, .residual(residualBase))
            writer.put(sy, .residual(residualBase + 1))
            if bx + by <= RANSConstants.maxRawBits {
                writer.putBits(ex << UInt64(by) | ey, bx + by)
            } else {
                writer.putWideBits(ex, bx)
                writer.putWideBits(ey, by)
            }
            (x1, x2, x3) = (p.x, x1, x2)
            (y1, y2, y3) = (p.y, y1, y2)
            i += 1
        }
        if i != start {
            context.setTime(t, frame: frame)
            context.xs = (x1, x2, x3)
            context.ys = (y1, y2, y3)
        }
        w = writer
        return i
    }

    /// Decodes the point of a kind 15 symbol just read under table K[3], and every following
    /// one of the run; returns the first other kind symbol read, -1 at the end of the batch, or
    /// `cleanEnd` at a clean end of the batch (then `d` is left as it was: nothing reads it).
    /// `decoded` counts the kind symbols read.
    @inline(never)
    static func decode<Sink: BinaryCommandSink>(
        _ d: inout RANSDecoder, _ context: inout StrokeContext, _ decoded: inout Int, into commands: inout Sink
    ) throws(BinaryCodecError) -> Int {
        var frame = context.frame
        guard frame != UInt64.max else { throw .badTime }
        // The last point and its two last steps (what the predictor uses): the step is computed
        // once a point, not twice as from three remembered points.
        var (x1, vx1, vx2) = Self.steps(context.xs)
        var (y1, vy1, vy2) = Self.steps(context.ys)
        let stroke = context.stroke
        let tool = context.tool
        var t = context.timeMs
        var coder = d
        // The kind symbols this run may still read (`decoded` <= maxCommands on entry), counted
        // in frames: one frame a point, so one comparison a point and no counter to keep.
        let kindFrameLimit = frame &+ UInt64(truncatingIfNeeded: Batch.maxCommands &- decoded)
        let firstFrame = frame
        var kind = -1
        while true {
            frame &+= 1
            guard frame < gridFrameLimit else { throw .badTime }
            t = BinaryPrediction.gridTime(frame)
            let px = Self.predict(x1, vx1, vx2)
            let py = Self.predict(y1, vy1, vy2)
            let sx = coder.get(.residual(residualBase))
            let sy = coder.get(.residual(residualBase + 1))
            let mx = coder.magnitude(sx)
            let my = coder.magnitude(sy)
            let bx = Int(truncatingIfNeeded: mx & 0xFF)
            let by = Int(truncatingIfNeeded: my & 0xFF)
            let ex: UInt64
            let ey: UInt64
            if bx + by <= RANSConstants.maxRawBits {
                let both = coder.getBits(bx + by)
                ex = both >> UInt64(by)
                ey = both & ((1 << UInt64(by)) &- 1)
            } else {
                ex = coder.getWideBits(bx)
                ey = coder.getWideBits(by)
            }
            // A prediction is an Int32 and a residual below 2^34 in magnitude: no Int64 overflow.
            guard let x = Int32(exactly: px &+ BinaryPrediction.residual(magnitude: mx, extra: ex)),
                  let y = Int32(exactly: py &+ BinaryPrediction.residual(magnitude: my, extra: ey)) else {
                throw .coordinateOutOfRange
            }
            (x1, vx1, vx2) = (Int64(x), Int64(x) &- x1, vx1)
            (y1, vy1, vy2) = (Int64(y), Int64(y) &- y1, vy1)
            guard commands.put(TimedCommand(
                timeMs: t, command: .point(StrokePoint(stroke: stroke, tool: tool, phase: .move, x: x, y: y)))) else {
                throw .tooManyCommands
            }
            if coder.isAtEnd {
                if coder.isCleanEnd { kind = cleanEnd }
                break
            }
            kind = coder.get(.kind(3))
            // The kind symbols read so far: frame - firstFrame.
            guard frame <= kindFrameLimit else { throw .tooManyCommands }
            if kind != BinaryKind.moveNextFrame { break }
            kind = -1
        }
        context.setTime(t, frame: frame)
        context.xs = Self.points(x1, vx1, vx2)
        context.ys = Self.points(y1, vy1, vy2)
        if kind != cleanEnd { d = coder }
        // One kind symbol a point but the last, and one after it unless the batch ended.
        decoded &+= Int(truncatingIfNeeded: frame &- firstFrame) &- (kind < 0 ? 1 : 0)
        return kind
    }

    @inline(__always)
    private static func steps(_ p: (Int32, Int32, Int32)) -> (Int64, Int64, Int64) {
        (Int64(p.0), Int64(p.0) &- Int64(p.1), Int64(p.1) &- Int64(p.2))
    }

    @inline(__always)
    private static func points(_ p1: Int64, _ v1: Int64, _ v2: Int64) -> (Int32, Int32, Int32) {
        (Int32(truncatingIfNeeded: p1), Int32(truncatingIfNeeded: p1 &- v1), Int32(truncatingIfNeeded: p1 &- v1 &- v2))
    }

    /// `BinaryPrediction.predict` for three points and one frame, from the last point and steps.
    @inline(__always)
    private static func predict(_ p1: Int64, _ v1: Int64, _ v2: Int64) -> Int64 {
        let q = p1 &+ ((v1 &* 99 &- v2 &* 45 &+ 32) >> 6)
        return min(max(q, Int64(Int32.min)), Int64(Int32.max))
    }
}
