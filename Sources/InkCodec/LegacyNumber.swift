// The legacy app's numbers, written and read in pure Swift: coordinates as C `printf("%f")`
// prints them (six decimals) and the small integer codes of its CSV messages.

/// Fixed-point text of the legacy protocol. A coordinate is an `Int32` count of millionths,
/// which is exactly what `%f` shows, so reading and printing are exact inverses on the app's
/// output.
public enum LegacyNumber {
    /// Digits accepted before the decimal point (the Int32 range needs at most 4).
    public static let maxIntegerDigits = 10
    /// Digits accepted after the decimal point: the app prints exactly this many.
    public static let decimals = 6
    /// Digits accepted in an integer field (code, type, colour, width).
    public static let maxCodeDigits = 9

    /// Appends `millionths` as `%f` prints `Double(millionths) / 1e6`: `-` when negative,
    /// at least one integer digit, `.`, six decimals.
    public static func appendCoordinate(_ millionths: Int32, to out: inout [UInt8]) {
        if millionths < 0 { out.append(UInt8(ascii: "-")) }
        let magnitude = millionths.magnitude  // UInt32: Int32.min is fine
        let whole = magnitude / 1_000_000
        appendDecimal(whole, to: &out)
        out.append(UInt8(ascii: "."))
        var fraction = magnitude % 1_000_000
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: decimals)
        var i = decimals - 1
        while fraction > 0 {
            digits[i] = UInt8(ascii: "0") + UInt8(fraction % 10)
            fraction /= 10
            i -= 1
        }
        out.append(contentsOf: digits)
    }

    public static func coordinateText(_ millionths: Int32) -> String {
        var out: [UInt8] = []
        appendCoordinate(millionths, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends a non-negative integer in decimal.
    public static func appendDecimal(_ value: UInt32, to out: inout [UInt8]) {
        if value >= 10 { appendDecimal(value / 10, to: &out) }
        out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    public enum ParseFailure: Error, Hashable, Sendable {
        case notANumber
        case notFinite
        case tooManyDecimals
        case outOfRange
    }

    /// Reads `-?D+(.D{0,6})?` into millionths. Text with exactly six decimals (what the app
    /// prints) reads back to a value that prints identically; the one exception is `-0.000000`
    /// (a tiny negative value), which reads as 0 and prints as `0.000000`.
    public static func parseCoordinate(_ field: ArraySlice<UInt8>) -> Result<Int32, ParseFailure> {
        var i = field.startIndex
        let negative = i < field.endIndex && field[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        if isNonFiniteWord(field[i...]) { return .failure(.notFinite) }
        var whole: Int64 = 0
        var wholeDigits = 0
        while i < field.endIndex, let d = digit(field[i]) {
            wholeDigits += 1
            if wholeDigits > maxIntegerDigits { return .failure(.notANumber) }
            whole = whole * 10 + Int64(d)
            i += 1
        }
        guard wholeDigits > 0 else { return .failure(.notANumber) }
        var fraction: Int64 = 0
        var fractionDigits = 0
        if i < field.endIndex && field[i] == UInt8(ascii: ".") {
            i += 1
            while i < field.endIndex, let d = digit(field[i]) {
                fractionDigits += 1
                if fractionDigits > decimals { return .failure(.tooManyDecimals) }
                fraction = fraction * 10 + Int64(d)
                i += 1
            }
        }
        guard i == field.endIndex else { return .failure(.notANumber) }
        for _ in fractionDigits..<decimals { fraction *= 10 }
        let magnitude = whole * 1_000_000 + fraction
        let value = negative ? -magnitude : magnitude
        guard value >= Int64(Int32.min), value <= Int64(Int32.max) else { return .failure(.outOfRange) }
        return .success(Int32(value))
    }

    /// Reads an unsigned decimal integer field of at most `maxCodeDigits` digits.
    public static func parseCode(_ field: ArraySlice<UInt8>) -> Result<Int, ParseFailure> {
        guard !field.isEmpty else { return .failure(.notANumber) }
        var start = field.startIndex
        if field[start] == UInt8(ascii: "-") { start += 1 }
        if isNonFiniteWord(field[start...]) { return .failure(.notFinite) }
        guard field.count <= maxCodeDigits else { return .failure(.notANumber) }
        var value = 0
        for byte in field {
            guard let d = digit(byte) else { return .failure(.notANumber) }
            value = value * 10 + Int(d)
        }
        return .success(value)
    }

    /// `value` in millionths, rounded exactly as glibc's `printf("%f")` rounds it (the exact
    /// binary value, ties to even); nil when not finite or outside the Int32 range. For native
    /// peers that hold coordinates as Double; `-0.0` and tiny negatives give 0.
    public static func millionths(printfRounding value: Double) -> Int32? {
        guard value.isFinite else { return nil }
        if value == 0 { return 0 }
        let significand: UInt64
        let exponent: Int
        if value.isNormal {
            significand = value.significandBitPattern | (1 << 52)
            exponent = Int(value.exponentBitPattern) - 1075
        } else {
            significand = value.significandBitPattern
            exponent = -1074
        }
        guard exponent < 0 else { return nil }  // |value| >= 2^52
        let shift = -exponent
        // N = significand * 10^6 < 2^73, held as (hi, lo); the result is N / 2^shift rounded.
        let (hi, lo) = significand.multipliedFullWidth(by: 1_000_000)
        let rounded: UInt64
        if shift > 74 {
            rounded = 0  // N < 2^73 < 2^(shift-1): below one half
        } else {
            let quotient: UInt64
            if shift >= 64 {
                quotient = hi >> UInt64(shift - 64)
            } else {
                guard hi >> UInt64(shift) == 0 else { return nil }
                quotient = (hi << UInt64(64 - shift)) | (lo >> UInt64(shift))
            }
            let halfBit = bit(hi: hi, lo: lo, shift - 1)
            let sticky = anyBitBelow(hi: hi, lo: lo, shift - 1)
            rounded = quotient + (halfBit && (sticky || quotient & 1 == 1) ? 1 : 0)
        }
        let negative = value < 0
        guard rounded <= (negative ? UInt64(Int32.max) + 1 : UInt64(Int32.max)) else { return nil }
        return negative ? Int32(truncatingIfNeeded: 0 &- Int64(rounded)) : Int32(rounded)
    }

    private static func bit(hi: UInt64, lo: UInt64, _ k: Int) -> Bool {
        k < 64 ? (lo >> UInt64(k)) & 1 == 1 : (hi >> UInt64(k - 64)) & 1 == 1
    }

    private static func anyBitBelow(hi: UInt64, lo: UInt64, _ k: Int) -> Bool {
        if k <= 0 { return false }
        if k < 64 { return lo & ((1 << UInt64(k)) - 1) != 0 }
        if lo != 0 { return true }
        return k > 64 && hi & ((1 << UInt64(k - 64)) - 1) != 0
    }

    @inline(__always)
    private static func digit(_ byte: UInt8) -> UInt8? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : nil
    }

    /// `nan`, `inf`, `infinity` in any case: what `%f` prints for non-finite values.
    private static func isNonFiniteWord(_ text: ArraySlice<UInt8>) -> Bool {
        let lower = text.prefix(8).map { $0 | 0x20 }
        return lower.starts(with: Array("nan".utf8)) || lower.starts(with: Array("inf".utf8))
    }
}
