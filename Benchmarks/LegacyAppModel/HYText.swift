// How the app reads the text of a frame: `NSString componentsSeparatedByString:` and the
// `integerValue`, `intValue` and `floatValue` of its fields.

/// Foundation's string-to-number reading, as far as the app relies on it.
enum HYText {
    /// The payload as the app's `NSString` (nil when it is not UTF-8: the app then gets no fields).
    static func fields(_ payload: [UInt8]) -> [[UInt8]]? {
        guard payload.allSatisfy({ $0 < 0x80 }) || String(validating: payload, as: UTF8.self) != nil else { return nil }
        return payload.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map(Array.init)
    }

    /// `integerValue`: leading spaces and tabs skipped, an optional sign, then digits up to the
    /// first other character; 0 when there are none; saturates at the `Int` range.
    static func integerValue(_ field: [UInt8]) -> Int {
        var i = field.startIndex
        while i < field.endIndex && (field[i] == 0x20 || field[i] == 0x09) { i += 1 }
        var negative = false
        if i < field.endIndex && (field[i] == UInt8(ascii: "-") || field[i] == UInt8(ascii: "+")) {
            negative = field[i] == UInt8(ascii: "-")
            i += 1
        }
        var value = 0
        var overflow = false
        while i < field.endIndex, field[i] >= UInt8(ascii: "0"), field[i] <= UInt8(ascii: "9") {
            let digit = Int(field[i] - UInt8(ascii: "0"))
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(digit)
            if o1 || o2 { overflow = true } else { value = a }
            i += 1
        }
        if overflow { return negative ? Int.min : Int.max }
        return negative ? -value : value
    }

    /// `intValue`: as `integerValue`, saturated at the 32-bit range.
    static func intValue(_ field: [UInt8]) -> Int32 {
        Int32(clamping: integerValue(field))
    }

    /// `floatValue`: leading spaces and tabs skipped, then the longest decimal prefix
    /// (`[+-]digits[.digits][e[+-]digits]`), rounded to a 32-bit float; 0 when there is none.
    static func floatValue(_ field: [UInt8]) -> Float {
        var i = field.startIndex
        while i < field.endIndex && (field[i] == 0x20 || field[i] == 0x09) { i += 1 }
        let start = i
        func digits() -> Int {
            let from = i
            while i < field.endIndex, field[i] >= UInt8(ascii: "0"), field[i] <= UInt8(ascii: "9") { i += 1 }
            return i - from
        }
        if i < field.endIndex && (field[i] == UInt8(ascii: "-") || field[i] == UInt8(ascii: "+")) { i += 1 }
        var mantissa = digits()
        if i < field.endIndex && field[i] == UInt8(ascii: ".") {
            i += 1
            mantissa += digits()
        }
        guard mantissa > 0 else { return 0 }
        let beforeExponent = i
        if i < field.endIndex && (field[i] == UInt8(ascii: "e") || field[i] == UInt8(ascii: "E")) {
            i += 1
            if i < field.endIndex && (field[i] == UInt8(ascii: "-") || field[i] == UInt8(ascii: "+")) { i += 1 }
            if digits() == 0 { i = beforeExponent }
        }
        return Float(String(decoding: field[start..<i], as: UTF8.self)) ?? 0
    }
}
