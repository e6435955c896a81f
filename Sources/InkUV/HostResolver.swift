import CLibUV
import Glibc

/// Host names to addresses with the system resolver (`/etc/hosts`, DNS, as nsswitch.conf says),
/// through libuv's `uv_getaddrinfo`. Blocking: for command-line clients before they connect,
/// never for the daemon's loop.
public enum HostResolver {
    /// Longest host name accepted (RFC 1035's 253 characters of a name).
    public static let maximumNameBytes = 253

    /// Every IPv4 and IPv6 address of `host` with `port`, in the resolver's order (RFC 6724's
    /// preference, as getaddrinfo sorts them), without repeats.
    public static func resolve(_ host: String, port: UInt16, loop: EventLoop) throws(UVError) -> [SocketAddress] {
        guard !host.isEmpty, host.utf8.count <= maximumNameBytes else { throw UVError(code: UV_EINVAL.rawValue, operation: "getaddrinfo") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)  // one entry per address, not one per socket type
        var request = uv_getaddrinfo_t()
        // No callback: libuv resolves synchronously and fills request.addrinfo.
        let rc = uv_getaddrinfo(loop.raw, &request, nil, host, String(port), &hints)
        guard rc == 0 else { throw UVError(code: rc, operation: "getaddrinfo \(host)") }
        defer { uv_freeaddrinfo(request.addrinfo) }
        var out: [SocketAddress] = []
        var entry = request.addrinfo
        while let current = entry {
            if let pointer = current.pointee.ai_addr, let address = SocketAddress(UnsafePointer(pointer)), !out.contains(address) {
                out.append(address)
            }
            entry = current.pointee.ai_next
        }
        guard !out.isEmpty else { throw UVError(code: UV_EAI_NONAME.rawValue, operation: "getaddrinfo \(host)") }
        return out
    }
}
