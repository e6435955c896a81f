import CLibUV
import Glibc

/// glibc's `struct mmsghdr`: one datagram of a sendmmsg(2) or recvmmsg(2) call, its `msg_hdr`
/// and the byte count the call fills in (`msg_len`). Swift's Glibc module leaves the GNU
/// extensions out; the CLibUV shim spells the layout.
public typealias MultipleMessageHeader = inkuv_mmsghdr

/// sendmmsg(2) and recvmmsg(2), for code that drives its own datagram sockets (the benchmark's
/// load generator). Each returns the number of messages handled, or -1 with `errno` set, as the
/// C calls do. `UDPSocket` batches through the same call (`startBatchingSends()`).
public enum MultipleMessages {
    public static func send(
        _ fd: Int32, _ messages: UnsafeMutablePointer<MultipleMessageHeader>, _ count: UInt32, _ flags: Int32
    ) -> Int32 {
        inkuv_sendmmsg(fd, messages, count, flags)
    }

    public static func receive(
        _ fd: Int32, _ messages: UnsafeMutablePointer<MultipleMessageHeader>, _ count: UInt32, _ flags: Int32,
        _ timeout: UnsafeMutablePointer<timespec>?
    ) -> Int32 {
        inkuv_recvmmsg(fd, messages, count, flags, timeout)
    }
}
