import CLibUV
import Glibc

/// Writes that reach the peer as one TCP segment each (`TCPConnection.sendRecord`), for a peer
/// whose reader mis-parses some splits (the legacy app reads 1030 bytes at a time).
///
/// Linux never appends later data to a segment sent with MSG_EOR, nor merges it with others
/// when it retransmits, and a segment no longer than the MSS is never cut by segmentation
/// offload. What remains is a window probe: when the peer's window has less room than a
/// queued segment, the kernel sends the part that fits. So a record is only sent while the
/// peer's advertised window (TCP_INFO) has room for everything outstanding plus it, and while
/// at most `maxOutstandingBytes` are unacknowledged, so the send buffer always takes it whole.
extension TCPConnection {
    /// SIOCOUTQ (linux/sockios.h, = TIOCOUTQ): bytes sent but not acknowledged, or not sent.
    static let outstandingIoctl: UInt = 0x5411
    /// `tcpi_snd_wnd` in `struct tcp_info` (linux/tcp.h, Linux 5.4+): the peer's last window.
    static let sendWindowOffset = 228
    /// Bytes of `struct tcp_info` up to and including `tcpi_snd_wnd`.
    static let tcpInfoBytes = 232

    /// Unacknowledged plus unsent bytes in the kernel; nil once closed.
    public var kernelOutstandingBytes: Int? {
        guard let fd = fileDescriptor else { return nil }
        var value: Int32 = 0
        guard ioctl(fd, TCPConnection.outstandingIoctl, &value) == 0 else { return nil }
        return Int(value)
    }

    /// The receive window the peer last advertised, in bytes; nil on kernels older than 5.4.
    public var peerWindowBytes: Int? {
        guard let fd = fileDescriptor else { return nil }
        var info = [UInt8](repeating: 0, count: 256)
        var length = socklen_t(info.count)
        let rc = info.withUnsafeMutableBytes { getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length) }
        guard rc == 0, Int(length) >= TCPConnection.tcpInfoBytes else { return nil }
        let o = TCPConnection.sendWindowOffset
        return Int(UInt32(info[o]) | UInt32(info[o + 1]) << 8 | UInt32(info[o + 2]) << 16 | UInt32(info[o + 3]) << 24)
    }

    /// The MSS this connection sends with (TCP_MAXSEG); nil once closed.
    public var maximumSegmentBytes: Int? {
        guard let fd = fileDescriptor else { return nil }
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_MAXSEG, &value, &length) == 0 else { return nil }
        return Int(value)
    }

    /// SO_SNDBUF (the kernel doubles it for its bookkeeping).
    public func setSendBuffer(bytes: Int) throws(UVError) {
        guard let fd = fileDescriptor else { throw UVError.closed("so_sndbuf") }
        var value = Int32(bytes)
        if setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size)) != 0 {
            throw UVError(code: -errno, operation: "so_sndbuf")
        }
    }

    /// Whether a record of `bytes` can be sent now without being split: nothing queued in
    /// libuv, at most `maxOutstanding` bytes unacknowledged after it, and room in the peer's window.
    public func canSendRecord(_ bytes: Int, maxOutstanding: Int) -> Bool {
        guard writeQueueBytes == 0, let outstanding = kernelOutstandingBytes else { return false }
        guard outstanding + bytes <= maxOutstanding else { return false }
        if let window = peerWindowBytes, outstanding + bytes > window { return false }
        return true
    }

    /// Sends `bytes` as one record (MSG_EOR); the caller checked `canSendRecord`. Returns the
    /// bytes sent; fewer than all only if the kernel refused part (the rest then goes through
    /// the write queue, and the record may be split).
    @discardableResult
    public func sendRecord(_ bytes: [UInt8]) throws(UVError) -> Int {
        guard let fd = fileDescriptor else { throw UVError.closed("send") }
        let flags = Int32(MSG_EOR) | Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)
        var sent = 0
        while true {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, flags) }
            if n >= 0 { sent = n; break }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { break }
            throw UVError(code: -errno, operation: "send")
        }
        if sent < bytes.count { try write(Array(bytes[sent...])) }
        return sent
    }
}
