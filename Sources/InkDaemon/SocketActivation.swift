import Glibc

/// Sockets passed by systemd socket activation: `LISTEN_FDS` descriptors starting at 3, meant for
/// the process named by `LISTEN_PID`, named by `LISTEN_FDNAMES` (colon-separated, from each
/// socket's `FileDescriptorName=`).
public struct SocketActivation: Equatable, Sendable {
    /// The first passed descriptor (SD_LISTEN_FDS_START).
    public static let firstDescriptor: Int32 = 3
    /// Most descriptors accepted; a larger `LISTEN_FDS` is refused as malformed.
    public static let maximumDescriptors = 64
    /// The name systemd uses when a socket has none.
    public static let unnamed = "unknown"

    public struct Socket: Equatable, Sendable {
        public let fd: Int32
        public let name: String
    }

    /// What kind of socket a descriptor is.
    public enum Kind: Equatable, Sendable { case datagram, stream, other }

    /// Malformed activation variables.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { "socket activation: \(reason)" }
    }

    /// Passed sockets, in descriptor order.
    public let sockets: [Socket]

    /// The descriptors passed under `name`, in order.
    public func descriptors(named name: String) -> [Int32] {
        sockets.filter { $0.name == name }.map(\.fd)
    }

    /// Reads the activation variables. Nil when there are none or they are meant for another
    /// process (`LISTEN_PID` differs from `pid`): start normally. Throws when they are malformed.
    public static func parse(environment: [String: String], pid: Int32) throws(ParseError) -> SocketActivation? {
        guard let countText = environment["LISTEN_FDS"] else { return nil }
        guard let pidText = environment["LISTEN_PID"] else {
            throw ParseError(reason: "LISTEN_FDS without LISTEN_PID")
        }
        guard let listenPID = Int32(pidText), listenPID > 0 else {
            throw ParseError(reason: "LISTEN_PID '\(pidText)' is not a process id")
        }
        guard listenPID == pid else { return nil }
        guard let count = Int(countText), count >= 0, count <= maximumDescriptors else {
            throw ParseError(reason: "LISTEN_FDS '\(countText)' is not a count from 0 to \(maximumDescriptors)")
        }
        var names = Array(repeating: unnamed, count: count)
        if let namesText = environment["LISTEN_FDNAMES"] {
            let given = namesText.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard given.count == count else {
                throw ParseError(reason: "LISTEN_FDNAMES has \(given.count) names for \(count) descriptors")
            }
            names = given
        }
        let sockets = (0..<count).map { Socket(fd: firstDescriptor + Int32($0), name: names[$0]) }
        return SocketActivation(sockets: sockets)
    }

    /// Reads the process environment, marks the passed descriptors close-on-exec and removes
    /// the variables so children do not inherit them (as sd_listen_fds does).
    public static func fromProcessEnvironment(_ environment: [String: String]) throws(ParseError) -> SocketActivation? {
        let activation = try parse(environment: environment, pid: getpid())
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDNAMES")
        for socket in activation?.sockets ?? [] {
            let flags = fcntl(socket.fd, F_GETFD)
            if flags >= 0 { _ = fcntl(socket.fd, F_SETFD, flags | FD_CLOEXEC) }
        }
        return activation
    }

    /// Whether `fd` is a datagram or stream socket (to match a passed socket to a listener).
    public static func kind(of fd: Int32) -> Kind {
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else { return .other }
        switch type {
        case Int32(SOCK_DGRAM.rawValue): return .datagram
        case Int32(SOCK_STREAM.rawValue): return .stream
        default: return .other
        }
    }
}
