import Glibc

/// A real `mosquitto` broker on 127.0.0.1, started as a child process from a minimal config
/// in a scratch directory. Killed (SIGKILL) by `stop()` or deinit, always.
final class MQTTBroker {
    static let binaryPath = "/usr/sbin/mosquitto"
    /// Bound on waiting for the broker to accept connections.
    static let startLimitMicroseconds: UInt64 = 5_000_000

    static var isInstalled: Bool { access(binaryPath, X_OK) == 0 }

    let port: UInt16
    let directory: String
    private(set) var pid: pid_t?

    /// Starts a broker on `port` (a free one when nil) and waits until it accepts. `access`:
    /// the config lines on who may connect and what they may do (`password_file`, `acl_file`).
    init(port: UInt16? = nil, access: String = "allow_anonymous true\n") throws {
        self.port = port ?? MQTTBroker.freePort()
        directory = DaemonProcess.scratchDirectory("mosquitto")
        let config = "listener \(self.port) 127.0.0.1\n" + access + "persistence false\n"
        writeFile(directory + "/mosquitto.conf", Array(config.utf8))
        try start()
    }

    deinit {
        stop()
        if directory.hasPrefix("/tmp/inkwired-test-") { _ = system("rm -rf '\(directory)'") }
    }

    /// (Re)starts the broker process on the same port and waits until it accepts.
    func start() throws {
        precondition(pid == nil)
        let argv = [MQTTBroker.binaryPath, "-c", directory + "/mosquitto.conf"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, directory + "/broker.log", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, directory + "/broker.log", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        let cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var child = pid_t()
        let rc = posix_spawn(&child, argv[0], &actions, nil, cArgs, environ)
        guard rc == 0 else { throw DaemonProcess.SpawnError(message: "posix_spawn mosquitto: \(String(cString: strerror(rc)))") }
        pid = child
        let deadline = monotonicMicroseconds() + MQTTBroker.startLimitMicroseconds
        while !MQTTBroker.accepts(port: self.port) {
            guard monotonicMicroseconds() < deadline else {
                stop()
                throw DaemonProcess.SpawnError(message: "mosquitto did not accept on port \(self.port)")
            }
            usleep(20_000)
        }
    }

    /// Kills the broker and reaps it; idempotent.
    func stop() {
        guard let pid else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        self.pid = nil
    }

    var log: String { String(decoding: readFile(directory + "/broker.log"), as: UTF8.self) }

    private static func loopbackAddress(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    private static func withSocket<T>(_ body: (Int32) -> T) -> T {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        precondition(fd >= 0)
        defer { close(fd) }
        return body(fd)
    }

    /// A port that was free a moment ago (bound to 0, then released).
    static func freePort() -> UInt16 {
        withSocket { fd in
            var address = loopbackAddress(0)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
            }
            precondition(bound)
            return UInt16(bigEndian: address.sin_port)
        }
    }

    static func accepts(port: UInt16) -> Bool {
        withSocket { fd in
            var address = loopbackAddress(port)
            return withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
        }
    }
}
