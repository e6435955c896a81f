import Glibc
import InkUV

/// A client of systemd's notification protocol: newline-separated `KEY=VALUE` assignments sent
/// as one datagram to the unix socket named by `NOTIFY_SOCKET` (a path, or `@name` for the
/// abstract namespace). Without `NOTIFY_SOCKET` every call does nothing, so the daemon behaves
/// the same outside systemd.
///
/// Sends never block the loop (MSG_DONTWAIT): a notification the manager cannot take at once is
/// reported as failed rather than stalling traffic.
public final class SystemdNotifier {
    /// What happened to one notification.
    public enum Outcome: Equatable, Sendable {
        case sent
        /// No `NOTIFY_SOCKET`: not running under a notify-type unit.
        case disabled
        /// The socket could not be reached; `reason` is the system's message.
        case failed(reason: String)
    }

    /// Longest `STATUS=` text sent (longer text is cut), keeping each notification one datagram.
    public static let maximumStatusBytes = 1024
    /// `sockaddr_un.sun_path` capacity on Linux.
    static let socketPathCapacity = 108

    /// The socket address from `NOTIFY_SOCKET`, nil when notifications are disabled.
    public let socketPath: String?
    /// The watchdog interval in microseconds from `WATCHDOG_USEC` (nil: no watchdog, or
    /// `WATCHDOG_PID` names another process).
    public let watchdogInterval: UInt64?
    private var fd: Int32 = -1
    private var watchdogTimer: LoopTimer?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `environment`.
    public init(environment: [String: String], pid: Int32 = getpid()) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        watchdogInterval = SystemdNotifier.watchdogInterval(environment: environment, pid: pid)
    }

    deinit {
        watchdogTimer?.close()
        if fd >= 0 { Glibc.close(fd) }
    }

    public var isEnabled: Bool { socketPath != nil }

    /// How often to ping: half the watchdog interval, as systemd recommends.
    public var watchdogPingInterval: UInt64? { watchdogInterval.map { max($0 / 2, 1) } }

    /// Parses `WATCHDOG_USEC` (a positive decimal), honouring `WATCHDOG_PID` when present.
    public static func watchdogInterval(environment: [String: String], pid: Int32) -> UInt64? {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let owner = environment["WATCHDOG_PID"] {
            guard let ownerPID = Int32(owner), ownerPID == pid else { return nil }
        }
        return usec
    }

    // MARK: messages

    /// The service is up (listening). `status` adds a `STATUS=` line.
    @discardableResult
    public func ready(status: String? = nil) -> Outcome {
        notify("READY=1" + (status.map { "\n" + SystemdNotifier.statusLine($0) } ?? ""))
    }

    /// Free-form status shown by `systemctl status`.
    @discardableResult
    public func status(_ text: String) -> Outcome { notify(SystemdNotifier.statusLine(text)) }

    /// Keep-alive for `WatchdogSec=`.
    @discardableResult
    public func watchdog() -> Outcome { notify("WATCHDOG=1") }

    /// A reload started; send `ready()` when it is done. Carries `MONOTONIC_USEC`, which
    /// `Type=notify-reload` requires.
    @discardableResult
    public func reloading() -> Outcome {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        return notify("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }

    /// Shutdown started.
    @discardableResult
    public func stopping() -> Outcome { notify("STOPPING=1") }

    /// Sends raw assignments (newline-separated `KEY=VALUE`) as one datagram.
    @discardableResult
    public func notify(_ assignments: String) -> Outcome {
        guard let socketPath else { return .disabled }
        if fd < 0 {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd < 0 { return .failed(reason: SystemdNotifier.errnoText()) }
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        let abstract = path.first == UInt8(ascii: "@")
        if abstract { path[0] = 0 }
        // A filesystem path needs room for its terminating NUL; an abstract name does not.
        guard path.count + (abstract ? 0 : 1) <= SystemdNotifier.socketPathCapacity else {
            return .failed(reason: "NOTIFY_SOCKET longer than \(SystemdNotifier.socketPathCapacity) bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (abstract ? 0 : 1))
        var message = assignments
        let sent = message.withUTF8 { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddr in
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL), sockaddr, length)
                }
            }
        }
        return sent < 0 ? .failed(reason: SystemdNotifier.errnoText()) : .sent
    }

    // MARK: watchdog

    /// Pings the watchdog from `loop` at half the interval, so a stuck loop stops the pings and
    /// systemd restarts the service. Returns false (and does nothing) without a watchdog.
    @discardableResult
    public func startWatchdog(loop: EventLoop, onPing: ((Outcome) -> Void)? = nil) throws(UVError) -> Bool {
        guard isEnabled, let interval = watchdogPingInterval else { return false }
        watchdogTimer?.close()
        let timer = try LoopTimer(loop: loop)
        watchdogTimer = timer
        timer.start(afterMicroseconds: interval, repeatingEveryMicroseconds: interval) { [weak self] in
            guard let self else { return }
            let outcome = self.watchdog()
            onPing?(outcome)
        }
        return true
    }

    /// Stops watchdog pings (at shutdown, after `stopping()`).
    public func stopWatchdog() {
        watchdogTimer?.close()
        watchdogTimer = nil
    }

    static func statusLine(_ text: String) -> String {
        // A newline would start a new assignment; keep STATUS one line and bounded.
        var clean = String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\n" || $0 == "\r" ? " " : $0 }))
        if clean.utf8.count > maximumStatusBytes {
            clean = String(decoding: clean.utf8.prefix(maximumStatusBytes), as: UTF8.self)
        }
        return "STATUS=" + clean
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
