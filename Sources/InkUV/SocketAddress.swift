import CLibUV
import Glibc

/// An IPv4 or IPv6 address with a port: a small value usable as a dictionary key (a UDP peer).
///
/// Text forms: `127.0.0.1:9000`, `[::1]:9000`, `[fe80::1%2]:9000` (scope by index or interface
/// name); `localhost:PORT` means `127.0.0.1:PORT`. Host names are not resolved (no blocking DNS
/// on the loop).
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    public enum Family: Hashable, Sendable { case ipv4, ipv6 }

    public let family: Family
    public let port: UInt16
    /// The address bytes, big-endian: IPv4 in the low 32 bits of `low`, IPv6 across both.
    let high: UInt64
    let low: UInt64
    /// IPv6 scope (interface index), 0 for IPv4 and global addresses.
    public let scopeID: UInt32

    /// Longest text accepted by `parse` (a scoped IPv6 literal with brackets and port fits).
    public static let maximumTextLength = 128

    /// An IPv4 address from its four octets.
    public static func ipv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, port: UInt16) -> SocketAddress {
        let value = UInt64(a) << 24 | UInt64(b) << 16 | UInt64(c) << 8 | UInt64(d)
        return SocketAddress(family: .ipv4, port: port, high: 0, low: value, scopeID: 0)
    }

    /// `127.0.0.1:port`.
    public static func loopbackIPv4(port: UInt16) -> SocketAddress { .ipv4(127, 0, 0, 1, port: port) }
    /// `[::1]:port`.
    public static func loopbackIPv6(port: UInt16) -> SocketAddress {
        SocketAddress(family: .ipv6, port: port, high: 0, low: 1, scopeID: 0)
    }
    /// `0.0.0.0:port`.
    public static func anyIPv4(port: UInt16) -> SocketAddress { .ipv4(0, 0, 0, 0, port: port) }
    /// `[::]:port`.
    public static func anyIPv6(port: UInt16) -> SocketAddress {
        SocketAddress(family: .ipv6, port: port, high: 0, low: 0, scopeID: 0)
    }

    init(family: Family, port: UInt16, high: UInt64, low: UInt64, scopeID: UInt32) {
        self.family = family
        self.port = port
        self.high = high
        self.low = low
        self.scopeID = scopeID
    }

    /// The same host with another port.
    public func withPort(_ port: UInt16) -> SocketAddress {
        SocketAddress(family: family, port: port, high: high, low: low, scopeID: scopeID)
    }

    /// Whether the host is 127.0.0.0/8 or ::1.
    public var isLoopback: Bool {
        switch family {
        case .ipv4: return low >> 24 == 127
        case .ipv6: return high == 0 && low == 1
        }
    }

    /// An IPv4 address as the IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) a dual-stack IPv6
    /// socket uses for it; other addresses unchanged.
    public var ipv4Mapped: SocketAddress {
        guard family == .ipv4 else { return self }
        return SocketAddress(family: .ipv6, port: port, high: 0, low: 0xffff_0000_0000 | low, scopeID: 0)
    }

    /// An IPv4-mapped IPv6 address as the plain IPv4 address; other addresses unchanged.
    /// Handy for keys and logs when an `[::]` socket also serves IPv4 peers.
    public var unmappedIPv4: SocketAddress {
        guard family == .ipv6, high == 0, low >> 32 == 0xffff else { return self }
        return SocketAddress(family: .ipv4, port: port, high: 0, low: low & 0xffff_ffff, scopeID: 0)
    }

    // MARK: sockaddr

    /// Reads an AF_INET or AF_INET6 sockaddr; nil for any other family.
    public init?(_ address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let sin = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
            self.init(family: .ipv4, port: UInt16(bigEndian: sin.sin_port), high: 0,
                      low: UInt64(UInt32(bigEndian: sin.sin_addr.s_addr)), scopeID: 0)
        case AF_INET6:
            let sin6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
            var bytes = sin6.sin6_addr
            let (high, low) = withUnsafeBytes(of: &bytes) { raw in
                (UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                 UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            }
            self.init(family: .ipv6, port: UInt16(bigEndian: sin6.sin6_port), high: high, low: low,
                      scopeID: sin6.sin6_scope_id)
        default:
            return nil
        }
    }

    /// Calls `body` with this address as a sockaddr and its length (built on the stack).
    public func withSockAddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        switch family {
        case .ipv4:
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            sin.sin_addr.s_addr = UInt32(truncatingIfNeeded: low).bigEndian
            return try withUnsafePointer(to: &sin) { (pointer) throws(E) -> R in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (address) throws(E) -> R in
                    try body(address, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .ipv6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            sin6.sin6_scope_id = scopeID
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { raw in
                raw.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
            }
            return try withUnsafePointer(to: &sin6) { (pointer) throws(E) -> R in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (address) throws(E) -> R in
                    try body(address, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }

    // MARK: text

    /// The host part as text: `127.0.0.1`, `::1`, `fe80::1%2`.
    public var host: String {
        switch family {
        case .ipv4:
            return "\(low >> 24 & 0xff).\(low >> 16 & 0xff).\(low >> 8 & 0xff).\(low & 0xff)"
        case .ipv6:
            var text = withSockAddr { address, _ in
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
                        buffer.initialize(repeating: 0)
                        _ = uv_ip6_name(sin6, buffer.baseAddress, buffer.count - 1)
                        return String(cString: buffer.baseAddress!)
                    }
                }
            }
            if scopeID != 0 { text += "%\(scopeID)" }
            return text
        }
    }

    /// `HOST:PORT` for IPv4, `[HOST]:PORT` for IPv6; `parse` reads it back.
    public var description: String {
        family == .ipv4 ? "\(host):\(port)" : "[\(host)]:\(port)"
    }

    /// Why a text address was refused.
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        public let text: String
        public let reason: String
        public var description: String { "invalid address '\(text)': \(reason)" }
    }

    /// Parses `HOST:PORT` (IPv4 literal or `localhost`) or `[IPv6]:PORT`.
    public static func parse(_ text: String) throws(ParseError) -> SocketAddress {
        func fail(_ reason: String) -> ParseError { ParseError(text: text, reason: reason) }
        guard text.utf8.count <= maximumTextLength else { throw fail("longer than \(maximumTextLength) bytes") }
        let hostPart: Substring
        let portPart: Substring
        let bracketed = text.hasPrefix("[")
        if bracketed {
            guard let close = text.firstIndex(of: "]") else { throw fail("missing ']'") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw fail("expected ':PORT' after ']'") }
            portPart = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw fail("expected HOST:PORT") }
            hostPart = text[..<colon]
            guard !hostPart.contains(":") else { throw fail("an IPv6 host must be written in brackets: [HOST]:PORT") }
            portPart = text[text.index(after: colon)...]
        }
        guard !portPart.isEmpty, portPart.utf8.count <= 5, portPart.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              let portValue = UInt16(portPart) else {
            throw fail("port must be a number from 0 to 65535")
        }
        if bracketed {
            guard let address = ipv6(String(hostPart), port: portValue) else { throw fail("not an IPv6 address") }
            return address
        }
        if hostPart == "localhost" { return .loopbackIPv4(port: portValue) }
        guard let address = ipv4(String(hostPart), port: portValue) else {
            throw fail("host must be an IPv4 address, localhost, or [IPv6]")
        }
        return address
    }

    /// Parses a text address; nil when malformed.
    public init?(_ text: String) {
        guard let parsed = try? SocketAddress.parse(text) else { return nil }
        self = parsed
    }

    private static func ipv4(_ host: String, port: UInt16) -> SocketAddress? {
        var addr = in_addr()
        guard inet_pton(AF_INET, host, &addr) == 1 else { return nil }
        return SocketAddress(family: .ipv4, port: port, high: 0, low: UInt64(UInt32(bigEndian: addr.s_addr)), scopeID: 0)
    }

    private static func ipv6(_ host: String, port: UInt16) -> SocketAddress? {
        var literal = Substring(host)
        var scope: UInt32 = 0
        if let percent = host.firstIndex(of: "%") {
            literal = host[..<percent]
            let zone = String(host[host.index(after: percent)...])
            if let index = UInt32(zone) {
                scope = index
            } else {
                scope = if_nametoindex(zone)
                if scope == 0 { return nil }
            }
        }
        var addr = in6_addr()
        guard inet_pton(AF_INET6, String(literal), &addr) == 1 else { return nil }
        let (high, low) = withUnsafeBytes(of: &addr) { raw in
            (UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
        return SocketAddress(family: .ipv6, port: port, high: high, low: low, scopeID: scope)
    }
}
