// Prediction and symbol mapping of the compact binary codec (docs/protocol.md section 2.3).

enum BinaryPrediction {
    /// Time deltas of up to this many 60 Hz frames have their own symbol.
    static let directFrames = 24
    static let largeFramesSymbol = 24
    static let offGridSymbol = 25
    /// Times at or above this are always coded off the frame grid (keeps the grid maths exact).
    static let gridLimitMs: UInt64 = 1 << 40
    /// Points with fewer remembered points than this code their residual signs with the sign
    /// tables (a stroke's start and first moves); later points put them raw.
    static let signModelledBelow = 3

    /// The 60 Hz frame nearest to `t` ms.
    @inline(__always)
    static func frame(_ t: UInt64) -> UInt64 { (t &* 60 &+ 500) / 1000 }

    /// The millisecond a frame is stamped with (rounded half up).
    @inline(__always)
    static func gridTime(_ f: UInt64) -> UInt64 { (f &* 1000 &+ 30) / 60 }

    @inline(__always)
    static func isOnGrid(_ t: UInt64) -> Bool { t < gridLimitMs && gridTime(frame(t)) == t }

    /// 0 for one frame, 1 for two, 2 otherwise: selects the predictor and residual table.
    @inline(__always)
    static func timeClass(_ timeSymbol: Int) -> Int {
        timeSymbol == 1 ? 0 : (timeSymbol == 2 ? 1 : 2)
    }

    /// Predicts one coordinate from the stroke's remembered points (newest first) and the time
    /// class. Only called with count >= 1. Clamped to Int32 so a residual fits 33 bits.
    @inline(__always)
    static func predict(_ p: (Int32, Int32, Int32), count: Int, timeClass c: Int) -> Int64 {
        let p1 = Int64(p.0)
        if count == 1 { return p1 }
        let v1 = p1 - Int64(p.1)
        var q: Int64
        if count == 2 {
            q = p1 + ((v1 * (c == 0 ? 59 : 8) + 32) >> 6)
        } else {
            let v2 = Int64(p.1) - Int64(p.2)
            switch c {
            case 0: q = p1 + ((v1 * 99 - v2 * 45 + 32) >> 6)
            case 1: q = p1 + ((v1 * 11 - v2 * 2 + 32) >> 6)
            default: q = p1 + ((v1 * 35 - v2 * 11 + 32) >> 6)
            }
        }
        return min(max(q, Int64(Int32.min)), Int64(Int32.max))
    }

    /// The residual table for a point: starts use tables 0/1, continued strokes 2...19.
    @inline(__always)
    static func residualBase(count: Int, timeClass c: Int) -> Int {
        count == 0 ? 0 : 2 &+ ((count &- 1) &* 3 &+ c) &* 2
    }

    /// Maps a residual to its magnitude symbol, and the extra raw bits that follow it
    /// (mantissa bits below the top three, then the sign), with their count.
    @inline(__always)
    static func residualSymbol(_ r: Int64) -> (symbol: Int, extra: UInt64, extraBits: Int) {
        // Magnitude and sign without a branch (a coin toss per coordinate; codec-speed helper).
        let negative = r >> 63
        let a = UInt64(bitPattern: (r ^ negative) &- negative)
        let sign = UInt64(bitPattern: negative) & 1
        if a < 4 { return (Int(a), sign, a == 0 ? 0 : 1) }
        let c = 64 - a.leadingZeroBitCount
        let low = UInt64(c - 3)
        let symbol = 4 * (c - 2) + Int((a >> low) & 3)
        return (symbol, ((a & ((1 << low) - 1)) << 1) | sign, c - 2)
    }

    /// Number of extra raw bits that follow a magnitude symbol.
    @inline(__always)
    static func extraBits(_ symbol: Int) -> Int {
        symbol < 4 ? (symbol == 0 ? 0 : 1) : symbol / 4
    }

    /// Inverse of `residualSymbol`.
    @inline(__always)
    static func residual(_ symbol: Int, extra: UInt64) -> Int64 {
        var a: UInt64
        if symbol < 4 {
            a = UInt64(symbol)
        } else {
            let low = UInt64(symbol / 4 - 1)
            a = ((4 | UInt64(symbol & 3)) << low) | (extra >> 1)
        }
        // The sign without a branch: it is a coin toss, and a mispredicted branch per coordinate
        // cost more than the arithmetic (speed, codec-speed helper).
        let negative = -Int64(bitPattern: extra & 1)
        return (Int64(bitPattern: a) ^ negative) &- negative
    }

    /// `residual(symbol, extra:)` given the symbol's magnitude word (`RANSDecoder.magnitude`).
    @inline(__always)
    static func residual(magnitude m: UInt64, extra: UInt64) -> Int64 {
        let a = (m >> 8) | (extra >> 1)
        let negative = -Int64(bitPattern: extra & 1)
        return (Int64(bitPattern: a) ^ negative) &- negative
    }

    @inline(__always)
    static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }

    @inline(__always)
    static func unzigzag(_ u: UInt64) -> Int64 { Int64(bitPattern: u >> 1) ^ -Int64(bitPattern: u & 1) }
}
