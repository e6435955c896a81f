import InkUV

/// Caps the kernel's retransmission-timeout backoff on every TCP connection the daemon accepts
/// (native and legacy; `--tcp-rto-max-ms`).
///
/// Linux doubles a stream's retransmission timeout after each lost retransmission, up to 120 s.
/// A whiteboard stream is thin (a small frame every 60 ms), so at classroom Wi-Fi loss a few
/// retransmissions lost in a row leave a device with nothing for tens of seconds while the
/// stream is otherwise fine: at 20 % loss each way a retransmission and its ack both get through
/// only 64 % of the time, and five failures in a row (1 in 160) from a 1.4 s timeout is 43 s.
/// Capped at 2 s (the ARQ's own probe-timeout ceiling), such a stream costs one segment every
/// 2 s while it lasts, which is nothing for congestion; the kernel's dead-peer limit
/// (tcp_retries2) then ends a truly dead stream sooner, about half a minute.
final class TCPRetransmitPolicy {
    var ceilingMs: UInt32
    private let logger: Logger
    private var reportedUnsupported = false

    init(ceilingMs: UInt32, logger: Logger) {
        self.ceilingMs = ceilingMs
        self.logger = logger
    }

    /// Sets the ceiling on a new connection (0 keeps the kernel's). A kernel older than Linux
    /// 6.15 has no such option: that is logged once, and streams keep the kernel's backoff.
    func apply(to connection: TCPConnection) {
        set { ms throws(UVError) in try connection.setRetransmitCeiling(milliseconds: ms) }
    }

    /// Sets it on a listener too: its SYN-ACK retransmissions, and what a connection starts
    /// with before `apply(to:)` (the handshake's RTT sample sets its first timeout).
    func apply(to listener: TCPListener) {
        set { ms throws(UVError) in try listener.setRetransmitCeiling(milliseconds: ms) }
    }

    private func set(_ body: (UInt32) throws(UVError) -> Void) {
        guard ceilingMs > 0 else { return }
        do {
            try body(ceilingMs)
        } catch where error.code == UVError.optionUnsupported {
            guard !reportedUnsupported else { return }
            reportedUnsupported = true
            logger.notice("kernel has no TCP_RTO_MAX_MS (Linux 6.15+): TCP streams keep its 120 s retransmission backoff", [:])
        } catch {
            logger.warning("cannot cap the TCP retransmission timeout", ["error": error])
        }
    }
}
