/// A small JSON writer (the daemon has no Foundation): objects, arrays, strings, numbers, as
/// UTF-8 bytes. The status page's JSON has a few fields for each of thousands of members and is
/// built on the daemon's loop, so the writer appends bytes and escapes only what must be.
final class JSONWriter {
    private(set) var bytes: [UInt8] = []
    init() { bytes.reserveCapacity(4096) }
    private var needsComma = [false]
    /// A key was written: its value follows without a comma.
    private var afterKey = false

    private func separate() {
        if afterKey {
            afterKey = false
            return
        }
        if needsComma[needsComma.count - 1] { bytes.append(UInt8(ascii: ",")) }
        needsComma[needsComma.count - 1] = true
    }

    func object(_ body: () -> Void) { nested(UInt8(ascii: "{"), UInt8(ascii: "}"), body) }
    func array(_ body: () -> Void) { nested(UInt8(ascii: "["), UInt8(ascii: "]"), body) }

    private func nested(_ open: UInt8, _ close: UInt8, _ body: () -> Void) {
        separate()
        bytes.append(open)
        needsComma.append(false)
        body()
        needsComma.removeLast()
        bytes.append(close)
    }

    /// A key whose value (an object or array) follows.
    func key(_ name: StaticString) {
        separate()
        appendKey(name)
        afterKey = true
    }

    func field(_ name: StaticString, _ value: String) {
        separate()
        appendKey(name)
        JSONWriter.appendQuoted(value, to: &bytes)
    }

    func field(_ name: StaticString, _ value: Int) {
        separate()
        appendKey(name)
        JSONWriter.appendInteger(value, to: &bytes)
    }

    func field(_ name: StaticString, _ value: Bool) {
        separate()
        appendKey(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// A number rounded to hundredths (`null` when absent or not finite).
    func field(_ name: StaticString, _ value: Double?) {
        separate()
        appendKey(name)
        guard let value, value.isFinite, abs(value) < 1e15 else {
            bytes.append(contentsOf: "null".utf8)
            return
        }
        let hundredths = Int((value * 100).rounded())
        if hundredths < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = hundredths.magnitude
        JSONWriter.appendInteger(Int(magnitude / 100), to: &bytes)
        let fraction = Int(magnitude % 100)
        guard fraction != 0 else { return }
        bytes.append(UInt8(ascii: "."))
        bytes.append(UInt8(ascii: "0") + UInt8(fraction / 10))
        if fraction % 10 != 0 { bytes.append(UInt8(ascii: "0") + UInt8(fraction % 10)) }
    }

    func field(_ name: StaticString, _ values: [String]) {
        separate()
        appendKey(name)
        bytes.append(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONWriter.appendQuoted(v, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Keys are the writer's own names: plain ASCII, never escaped.
    private func appendKey(_ name: StaticString) {
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }

    /// Digits without a heap allocation (`String(Int)` is a small string).
    static func appendInteger(_ value: Int, to out: inout [UInt8]) {
        out.append(contentsOf: String(value).utf8)
    }

    /// `s` as a JSON string: quotes, backslashes, control characters, the line separators
    /// JavaScript once rejected, and "<" (so the JSON is safe inside a page) escaped.
    static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var i = 0
            while i < utf8.count {
                let b = utf8[i]
                switch b {
                case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), b])
                case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), b])
                case 0..<0x20, UInt8(ascii: "<"): appendEscape(UInt32(b), to: &out)
                case 0xE2 where i + 2 < utf8.count && utf8[i + 1] == 0x80 && (utf8[i + 2] == 0xA8 || utf8[i + 2] == 0xA9):
                    appendEscape(utf8[i + 2] == 0xA8 ? 0x2028 : 0x2029, to: &out)
                    i += 2
                default: out.append(b)
                }
                i += 1
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func appendEscape(_ scalar: UInt32, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u")])
        for shift in stride(from: 12, through: 0, by: -4) { out.append(hex[Int(scalar >> UInt32(shift)) & 0xF]) }
    }
}
