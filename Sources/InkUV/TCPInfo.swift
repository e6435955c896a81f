import CLibUV
import Glibc

/// What the kernel knows of one TCP connection (TCP_INFO), for the status page.
public struct TCPInfo: Sendable, Equatable {
    /// Smoothed round-trip time, microseconds.
    public var rttMicroseconds: UInt32
    /// Segments retransmitted over the connection's life.
    public var totalRetransmissions: UInt32
    /// Segments sent over the connection's life (0 on kernels before 4.2).
    public var segmentsOut: UInt32

    /// Retransmitted segments per segment sent, in percent (nil before anything was sent).
    public var retransmittedPercent: Double? {
        segmentsOut == 0 ? nil : Double(totalRetransmissions) * 100 / Double(segmentsOut)
    }
}

/// Offsets in the kernel's `struct tcp_info` (include/uapi/linux/tcp.h): glibc's copy of the
/// struct ends at `tcpi_total_retrans` (byte 100), before `tcpi_segs_out`.
private let rttOffset = 68
private let totalRetransOffset = 100
private let segsOutOffset = 136

func tcpInfo(_ handle: UnsafeMutablePointer<uv_tcp_t>) -> TCPInfo? {
    var fd: uv_os_fd_t = -1
    guard uv_fileno(asHandle(handle), &fd) == 0 else { return nil }
    var buffer = [UInt8](repeating: 0, count: 256)
    var length = socklen_t(buffer.count)
    let ok = buffer.withUnsafeMutableBytes { getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length) == 0 }
    guard ok, length >= socklen_t(totalRetransOffset + 4) else { return nil }
    func u32(_ offset: Int) -> UInt32 {
        guard Int(length) >= offset + 4 else { return 0 }
        return buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }
    return TCPInfo(rttMicroseconds: u32(rttOffset), totalRetransmissions: u32(totalRetransOffset), segmentsOut: u32(segsOutOffset))
}

extension TCPConnection {
    /// The kernel's view of this connection (RTT, retransmissions); nil once closed.
    public var info: TCPInfo? { handle.flatMap(tcpInfo) }
}
