import Glibc

/// The real `inkwire` CLI as a child process; stdout and stderr go to files the test reads.
final class ClientProcess {
    let pid: pid_t
    let outPath: String
    let errPath: String
    private(set) var exitStatus: Int32?

    /// Bound on one CLI run in these tests.
    static let runLimitMicroseconds: UInt64 = 30_000_000

    /// `inkwire`, next to `inkwired` in the build directory.
    static var binaryPath: String {
        String(DaemonProcess.binaryPath.dropLast("inkwired".count)) + "inkwire"
    }

    init(_ arguments: [String], directory: String, environment: [String: String] = [:]) throws {
        let tag = UInt32.random(in: 0...UInt32.max)
        outPath = directory + "/inkwire-\(tag).out"
        errPath = directory + "/inkwire-\(tag).err"
        // `--wrapped-by PROGRAM ARGS...`: run through PROGRAM, which is given the binary itself.
        let argv = arguments.first == "--wrapped-by" ? Array(arguments.dropFirst()) : [ClientProcess.binaryPath] + arguments
        // Keys learned on first use go to the test's directory, never a real home.
        pid = try ChildSpawn.spawn(argv, environment: ["PATH": "/usr/bin:/bin", "USER": "tester",
                                                       "INKWIRE_KNOWN_DAEMONS": directory + "/known-daemons"].merging(environment) { $1 }, redirects: [
            (0, .file("/dev/null")), (1, .file(outPath)), (2, .file(errPath)),
        ])
    }

    deinit {
        if exitStatus == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Runs to the end; the exit code (128+n for a signal), or nil after the limit (killed).
    static func run(_ arguments: [String], directory: String, environment: [String: String] = [:]) throws -> ClientProcess {
        let p = try ClientProcess(arguments, directory: directory, environment: environment)
        p.wait()
        return p
    }

    @discardableResult
    func wait(limitMicroseconds: UInt64 = ClientProcess.runLimitMicroseconds) -> Int32? {
        let deadline = monotonicMicroseconds() + limitMicroseconds
        while exitStatus == nil && monotonicMicroseconds() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                let signal = status & 0x7f
                exitStatus = signal == 0 ? (status >> 8) & 0xff : 128 + signal
            } else {
                usleep(5_000)
            }
        }
        return exitStatus
    }

    /// Whether the process has ended (reaps it without waiting).
    var hasExited: Bool {
        if exitStatus == nil {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                let signal = status & 0x7f
                exitStatus = signal == 0 ? (status >> 8) & 0xff : 128 + signal
            }
        }
        return exitStatus != nil
    }

    var output: String { String(decoding: readFile(outPath), as: UTF8.self) }
    var errors: String { String(decoding: readFile(errPath), as: UTF8.self) }
    var outputLines: [String] { output.split(separator: "\n").map(String.init) }
}
