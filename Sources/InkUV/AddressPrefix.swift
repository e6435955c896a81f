/// An IPv4 or IPv6 network in CIDR notation: `10.0.0.0/8`, `192.168.1.7` (one host, /32),
/// `fd00::/8`, `::1` (/128). An IPv4 prefix also matches the IPv4-mapped IPv6 form of its
/// addresses (`::ffff:10.1.2.3`), which is how a dual-stack `[::]` socket sees IPv4 peers.
public struct AddressPrefix: Hashable, Sendable, CustomStringConvertible {
    public let family: SocketAddress.Family
    /// Prefix length in bits: 0...32 for IPv4, 0...128 for IPv6.
    public let length: Int
    /// The network address (host bits zero), as `SocketAddress` keeps its bytes.
    private let high: UInt64
    private let low: UInt64

    /// Longest text accepted by `parse` (an IPv6 literal with its length fits well within).
    public static let maximumTextLength = 64

    /// Parses `ADDRESS/LENGTH` or `ADDRESS`. Refuses host bits set (`10.1.0.0/8`: a typo for
    /// `10.0.0.0/8` or for `/16`, never silently widened) and IPv6 scopes.
    public static func parse(_ text: String) throws(SocketAddress.ParseError) -> AddressPrefix {
        func fail(_ reason: String) -> SocketAddress.ParseError { SocketAddress.ParseError(text: text, reason: reason) }
        guard !text.isEmpty, text.utf8.count <= maximumTextLength else { throw fail("expected ADDRESS/LENGTH, at most \(maximumTextLength) bytes") }
        var hostPart = Substring(text)
        var lengthText: Substring?
        if let slash = text.firstIndex(of: "/") {
            hostPart = text[..<slash]
            lengthText = text[text.index(after: slash)...]
        }
        guard !hostPart.contains("%"), !hostPart.contains("["), hostPart != "localhost" else {
            throw fail("expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8")
        }
        let isIPv6 = hostPart.contains(":")
        guard let address = SocketAddress((isIPv6 ? "[\(hostPart)]" : String(hostPart)) + ":0") else {
            throw fail("expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8")
        }
        let bits = address.family == .ipv4 ? 32 : 128
        var length = bits
        if let lengthText {
            guard !lengthText.isEmpty, lengthText.utf8.count <= 3, lengthText.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let value = Int(lengthText), value <= bits else {
                throw fail("the prefix length must be a number from 0 to \(bits)")
            }
            length = value
        }
        let (maskHigh, maskLow) = AddressPrefix.mask(family: address.family, length: length)
        guard address.high & ~maskHigh == 0, address.low & ~maskLow == 0 else {
            let network = AddressPrefix(family: address.family, length: length, high: address.high & maskHigh, low: address.low & maskLow)
            throw fail("host bits are set; the network is \(network)")
        }
        return AddressPrefix(family: address.family, length: length, high: address.high, low: address.low)
    }

    private init(family: SocketAddress.Family, length: Int, high: UInt64, low: UInt64) {
        self.family = family
        self.length = length
        self.high = high
        self.low = low
    }

    /// The masks over `high` and `low` that keep the first `length` bits of the address.
    private static func mask(family: SocketAddress.Family, length: Int) -> (UInt64, UInt64) {
        func ones(_ count: Int, of width: Int) -> UInt64 {
            count <= 0 ? 0 : count >= 64 ? ~0 : (~UInt64(0) << UInt64(64 - count)) >> UInt64(64 - width)
        }
        switch family {
        case .ipv4: return (0, ones(length, of: 32))
        case .ipv6: return (ones(length, of: 64), ones(length - 64, of: 64))
        }
    }

    /// Whether `address` (any port) lies in this network.
    public func contains(_ address: SocketAddress) -> Bool {
        let address = family == .ipv4 ? address.unmappedIPv4 : address
        guard address.family == family else { return false }
        let (maskHigh, maskLow) = AddressPrefix.mask(family: family, length: length)
        return address.high & maskHigh == high && address.low & maskLow == low
    }

    /// `10.0.0.0/8`, `fd00::/8`; `parse` reads it back.
    public var description: String {
        let address = SocketAddress(family: family, port: 0, high: high, low: low, scopeID: 0)
        return "\(address.host)/\(length)"
    }
}
