@testable import InkDaemon
import Testing

@Suite struct JSONWriterTests {
    private func written(_ body: (JSONWriter) -> Void) -> String {
        let w = JSONWriter()
        body(w)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    @Test func objectsArraysAndScalars() {
        let json = written { w in
            w.object {
                w.field("name", "room 1")
                w.field("count", -120)
                w.field("zero", 0)
                w.field("live", true)
                w.field("tags", ["a", "b"])
                w.key("members")
                w.array {
                    w.object { w.field("rttMs", 12.345) }
                    w.object { w.field("rttMs", nil as Double?) }
                }
            }
        }
        #expect(json == #"{"name":"room 1","count":-120,"zero":0,"live":true,"tags":["a","b"],"members":[{"rttMs":12.35},{"rttMs":null}]}"#)
    }

    @Test func numbersAreRoundedToHundredths() {
        let values: [Double?] = [0, 1, 1.5, 0.05, -2.25, 0.004, 99.999, .infinity, .nan, 1e20]
        let json = written { w in w.object { for v in values { w.field("v", v) } } }
        #expect(json == #"{"v":0,"v":1,"v":1.5,"v":0.05,"v":-2.25,"v":0,"v":100,"v":null,"v":null,"v":null}"#)
    }

    /// Quotes, backslashes, control characters, "<" and U+2028/2029 are escaped; other text,
    /// any script, passes as UTF-8.
    @Test func stringsAreEscaped() {
        let json = written { w in w.object { w.field("s", "a\"b\\c\n\u{1}</script>\u{2028}\u{2029}é教室") } }
        #expect(json == #"{"s":"a\"b\\c\u000a\u0001\u003c/script>\u2028\u2029é教室"}"#)
    }
}
