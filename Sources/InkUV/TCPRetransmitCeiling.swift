import CLibUV
import Glibc

/// TCP_RTO_MAX_MS (Linux 6.15+, include/uapi/linux/tcp.h): the ceiling of one socket's
/// retransmission timeout. Debian 12's headers predate it, so the number is spelled out here.
let tcpRetransmitCeilingOption: Int32 = 44

/// The kernel's own ceiling (TCP_RTO_MAX) and the option's allowed range, in milliseconds.
public let tcpKernelRetransmitCeilingMs: UInt32 = 120_000

/// Sets TCP_RTO_MAX_MS on a TCP handle's socket. A kernel without the option answers
/// `UVError.optionUnsupported` (older than 6.15), which the caller may treat as "keep the kernel's 120 s".
func setRetransmitCeiling(_ handle: UnsafeMutablePointer<uv_tcp_t>, milliseconds: UInt32, _ operation: String) throws(UVError) {
    guard (1...tcpKernelRetransmitCeilingMs).contains(milliseconds) else {
        throw UVError(code: UVError.invalidArgument, operation: operation)
    }
    var fd: uv_os_fd_t = -1
    try UVError.check(uv_fileno(asHandle(handle), &fd), operation)
    var value = Int32(milliseconds)
    if setsockopt(fd, Int32(IPPROTO_TCP), tcpRetransmitCeilingOption, &value, socklen_t(MemoryLayout<Int32>.size)) != 0 {
        throw UVError(code: -errno, operation: operation)
    }
}

/// Reads TCP_RTO_MAX_MS back (for tests and diagnostics); nil when the kernel lacks it.
func retransmitCeiling(_ handle: UnsafeMutablePointer<uv_tcp_t>) -> UInt32? {
    var fd: uv_os_fd_t = -1
    guard uv_fileno(asHandle(handle), &fd) == 0 else { return nil }
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, Int32(IPPROTO_TCP), tcpRetransmitCeilingOption, &value, &length) == 0, value > 0 else { return nil }
    return UInt32(value)
}
