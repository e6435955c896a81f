import Testing
import InkUV

@Suite struct SocketAddressTests {
    @Test(arguments: [
        ("127.0.0.1:9000", "127.0.0.1:9000"),
        ("0.0.0.0:0", "0.0.0.0:0"),
        ("localhost:65535", "127.0.0.1:65535"),
        ("[::1]:80", "[::1]:80"),
        ("[::]:7", "[::]:7"),
        ("[2001:db8:0:0:0:0:0:1]:443", "[2001:db8::1]:443"),
        ("[fe80::1%3]:5", "[fe80::1%3]:5"),
    ])
    func parsesAndPrints(text: String, printed: String) throws {
        let address = try SocketAddress.parse(text)
        #expect(address.description == printed)
        #expect(try SocketAddress.parse(printed) == address)
    }

    @Test(arguments: ["", "1.2.3.4", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:-1", "1.2.3.4:+80", "::1:80",
                      "[::1]80", "[::1:80", "[1.2.3.4]:80", "example.com:80", "256.0.0.1:1", "[::1]:1x",
                      String(repeating: "1", count: 200) + ":1"])
    func refusesMalformed(text: String) {
        #expect(throws: SocketAddress.ParseError.self) { try SocketAddress.parse(text) }
        #expect(SocketAddress(text) == nil)
    }

    @Test func fieldsAndKeys() throws {
        let a = SocketAddress.ipv4(127, 0, 0, 1, port: 9)
        #expect(a == SocketAddress.loopbackIPv4(port: 9))
        #expect(a.family == .ipv4 && a.port == 9 && a.isLoopback)
        #expect(SocketAddress.loopbackIPv6(port: 1).isLoopback)
        #expect(!(try SocketAddress.parse("10.0.0.1:1")).isLoopback)
        #expect(a.withPort(10).port == 10)
        var table: [SocketAddress: Int] = [:]
        table[a] = 1
        table[.loopbackIPv6(port: 9)] = 2
        table[try SocketAddress.parse("127.0.0.1:9")] = 3
        #expect(table.count == 2)
        #expect(table[a] == 3)
    }

    @Test func mapsIPv4IntoIPv6AndBack() throws {
        let v4 = try SocketAddress.parse("10.1.2.3:80")
        let mapped = v4.ipv4Mapped
        #expect(mapped == (try SocketAddress.parse("[::ffff:10.1.2.3]:80")))
        #expect(mapped.unmappedIPv4 == v4)
        #expect(SocketAddress.loopbackIPv6(port: 1).unmappedIPv4 == .loopbackIPv6(port: 1))
        #expect(mapped.ipv4Mapped == mapped && v4.unmappedIPv4 == v4)
    }

    @Test func roundTripsThroughSockaddr() throws {
        for text in ["127.0.0.1:1234", "[::1]:4321", "[fe80::abcd%2]:1"] {
            let address = try SocketAddress.parse(text)
            let back = address.withSockAddr { pointer, _ in SocketAddress(pointer) }
            #expect(back == address)
        }
    }

    @Test func parseErrorSaysWhy() {
        do {
            _ = try SocketAddress.parse("::1:80")
            Issue.record("parsed an unbracketed IPv6 address")
        } catch {
            #expect(error.description.contains("brackets"))
        }
    }
}
