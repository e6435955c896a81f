import Testing
@testable import InkUV

@Suite struct AddressPrefixTests {
    @Test(arguments: [
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("192.168.1.7", "192.168.1.7/32"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("fd00::/8", "fd00::/8"),
        ("::1", "::1/128"),
        ("::/0", "::/0"),
        ("2001:db8:0:0:1::/80", "2001:db8:0:0:1::/80"),
        ("2001:db8::/64", "2001:db8::/64"),
    ])
    func parsesAndPrints(text: String, printed: String) throws {
        let prefix = try AddressPrefix.parse(text)
        #expect(prefix.description == printed)
        #expect(try AddressPrefix.parse(printed) == prefix)
    }

    @Test(arguments: [
        ("", "expected ADDRESS/LENGTH, at most 64 bytes"),
        ("10.0.0.0/33", "the prefix length must be a number from 0 to 32"),
        ("fd00::/129", "the prefix length must be a number from 0 to 128"),
        ("10.0.0.0/", "the prefix length must be a number from 0 to 32"),
        ("10.0.0.0/+8", "the prefix length must be a number from 0 to 32"),
        ("10.0.0.0/08x", "the prefix length must be a number from 0 to 32"),
        ("10.1.0.0/8", "host bits are set; the network is 10.0.0.0/8"),
        ("fd00::1/8", "host bits are set; the network is fd00::/8"),
        ("10.0.0", "expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8"),
        ("fe80::1%2/64", "expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8"),
        ("[::1]/128", "expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8"),
        ("localhost", "expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8"),
        ("school.example/24", "expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8"),
    ])
    func refuses(text: String, reason: String) {
        #expect(throws: SocketAddress.ParseError(text: text, reason: reason)) { try AddressPrefix.parse(text) }
    }

    @Test func containsExactlyItsAddresses() throws {
        let lan = try AddressPrefix.parse("192.168.10.0/23")
        #expect(lan.contains(SocketAddress("192.168.10.0:1")!))
        #expect(lan.contains(SocketAddress("192.168.11.255:7421")!))
        #expect(!lan.contains(SocketAddress("192.168.12.0:1")!))
        #expect(!lan.contains(SocketAddress("192.168.9.255:1")!))
        // A dual-stack socket's view of an IPv4 peer matches the IPv4 network.
        #expect(lan.contains(SocketAddress("192.168.10.5:1")!.ipv4Mapped))
        #expect(!lan.contains(SocketAddress("[::1]:1")!))
        let loopback = try AddressPrefix.parse("127.0.0.0/8")
        #expect(loopback.contains(.loopbackIPv4(port: 9)) && loopback.contains(SocketAddress("127.255.0.3:9")!))
        #expect(!loopback.contains(.loopbackIPv6(port: 9)))
        let everyone = try AddressPrefix.parse("0.0.0.0/0")
        #expect(everyone.contains(SocketAddress("203.0.113.9:1")!) && !everyone.contains(SocketAddress("[2001:db8::1]:1")!))

        let ula = try AddressPrefix.parse("fd00::/8")
        #expect(ula.contains(SocketAddress("[fd12:3456::1]:1")!))
        #expect(!ula.contains(SocketAddress("[fe80::1]:1")!))
        #expect(!ula.contains(SocketAddress("10.0.0.1:1")!))
        let host = try AddressPrefix.parse("::1")
        #expect(host.contains(.loopbackIPv6(port: 5)) && !host.contains(SocketAddress("[::2]:5")!))
        // A prefix longer than 64 bits tests the low word too.
        let long = try AddressPrefix.parse("2001:db8:0:0:8000::/65")
        #expect(long.description == "2001:db8:0:0:8000::/65")
        #expect(long.contains(SocketAddress("[2001:db8:0:0:8000:0:0:1]:1")!))
        #expect(long.contains(SocketAddress("[2001:db8:0:0:c000::]:1")!))
        #expect(!long.contains(SocketAddress("[2001:db8::1]:1")!))
        #expect(!long.contains(SocketAddress("[2001:db8:0:1:8000::]:1")!))
        // An IPv6 network never matches an IPv4-mapped address's IPv4 form by accident.
        let mapped = try AddressPrefix.parse("::ffff:0:0/96")
        #expect(mapped.contains(SocketAddress("[::ffff:10.0.0.1]:1")!))
        #expect(!mapped.contains(SocketAddress("10.0.0.1:1")!))
    }
}
