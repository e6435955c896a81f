import CLibUV

/// A failed libuv call: the libuv error code, its name (`ECONNREFUSED`) and message, and the
/// operation that failed (`tcp_connect 127.0.0.1:9`).
///
/// Built only on the error path, so the strings cost nothing when calls succeed.
public struct UVError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The negative libuv error code (compare with the static codes below).
    public let code: Int32
    /// The libuv error name, e.g. `ECONNREFUSED`.
    public let name: String
    /// The libuv error message, e.g. `connection refused`.
    public let message: String
    /// What was being done, e.g. `udp_bind [::1]:0`.
    public let operation: String

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
        self.name = UVError.text(code, uv_err_name_r)
        self.message = UVError.text(code, uv_strerror_r)
    }

    public var description: String { "\(operation): \(name) (\(message))" }

    /// Turns a libuv return code into a thrown error when it is negative; returns it otherwise.
    @discardableResult
    public static func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(UVError) -> Int32 {
        if result < 0 { throw UVError(code: result, operation: operation()) }
        return result
    }

    // Codes callers commonly branch on.
    public static let connectionRefused: Int32 = UV_ECONNREFUSED.rawValue
    public static let addressInUse: Int32 = UV_EADDRINUSE.rawValue
    public static let endOfFile: Int32 = UV_EOF.rawValue
    public static let cancelled: Int32 = UV_ECANCELED.rawValue
    public static let wouldBlock: Int32 = UV_EAGAIN.rawValue
    public static let badFileDescriptor: Int32 = UV_EBADF.rawValue
    public static let noBufferSpace: Int32 = UV_ENOBUFS.rawValue
    public static let invalidArgument: Int32 = UV_EINVAL.rawValue
    public static let messageTooLong: Int32 = UV_EMSGSIZE.rawValue
    public static let connectionReset: Int32 = UV_ECONNRESET.rawValue
    /// ENOPROTOOPT: the kernel does not know a socket option (e.g. TCP_RTO_MAX_MS before 6.15).
    public static let optionUnsupported: Int32 = UV_ENOPROTOOPT.rawValue
    public static let brokenPipe: Int32 = UV_EPIPE.rawValue

    /// The error raised when a closed handle is used.
    static func closed(_ operation: String) -> UVError { UVError(code: badFileDescriptor, operation: operation) }

    private static func text(
        _ code: Int32, _ render: (Int32, UnsafeMutablePointer<CChar>?, Int) -> UnsafeMutablePointer<CChar>?
    ) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 128) { buffer in
            buffer.initialize(repeating: 0)
            _ = render(code, buffer.baseAddress, buffer.count)
            return String(cString: buffer.baseAddress!)
        }
    }
}
