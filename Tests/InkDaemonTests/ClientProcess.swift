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

    init(_ arguments: [String], directory: String) throws {
        let tag = UInt32.random(in: 0...UInt32.max)
        outPath = directory + "/inkwire-\(tag).out"
        errPath = directory + "/inkwire-\(tag).err"
        let argv = [ClientProcess.binaryPath] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let cArgs = argv.map { strdup($0) } + [nil]
        let environment: [String] = ["PATH=/usr/bin:/bin", "USER=tester"]
        let cEnv = environment.map { strdup($0) } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child = pid_t()
        let rc = posix_spawn(&child, argv[0], &actions, &attributes, cArgs, cEnv)
        guard rc == 0 else { throw DaemonProcess.SpawnError(message: "posix_spawn \(argv[0]): \(String(cString: strerror(rc)))") }
        pid = child
    }

    deinit {
        if exitStatus == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Runs to the end; the exit code (128+n for a signal), or nil after the limit (killed).
    static func run(_ arguments: [String], directory: String) throws -> ClientProcess {
        let p = try ClientProcess(arguments, directory: directory)
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

    var output: String { String(decoding: readFile(outPath), as: UTF8.self) }
    var errors: String { String(decoding: readFile(errPath), as: UTF8.self) }
    var outputLines: [String] { output.split(separator: "\n").map(String.init) }
}
