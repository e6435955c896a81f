import Glibc

/// Child processes for `PacketLink`: started with posix_spawn and ended without ever signalling a
/// pid that may have been reused.
enum ChildProcess {
    /// How often `end` looks whether the children have exited.
    static let pollMicroseconds: UInt32 = 10_000

    /// Spawns `argv` (`argv[0]` a path) with an empty signal mask and default handlers (the
    /// harness may block SIGINT/SIGTERM), stdin from /dev/null, stdout/stderr redirected when
    /// given, and `environment` (nil: this process's).
    static func spawn(_ argv: [String], environment: [String: String]?, stdout: Int32?, stderr: Int32?) throws(NetworkNamespace.Failure) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
        if let stderr { posix_spawn_file_actions_adddup2(&actions, stderr, 2) }
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
        let cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var child = pid_t()
        let rc: Int32
        if let environment {
            let cEnv = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { cEnv.forEach { free($0) } }
            rc = posix_spawn(&child, argv[0], &actions, &attributes, cArgs, cEnv)
        } else {
            rc = posix_spawn(&child, argv[0], &actions, &attributes, cArgs, environ)
        }
        guard rc == 0 else {
            throw NetworkNamespace.Failure(description: "posix_spawn \(argv[0]): \(String(cString: strerror(rc)))")
        }
        return child
    }

    /// Ends those of `pids` that still run: SIGTERM, up to `graceMicroseconds` to exit, then
    /// SIGKILL; reaps them. A pid the caller already reaped (ECHILD) or that already exited is
    /// only reaped, never signalled, so a reused pid is never hit.
    static func end(_ pids: [pid_t], graceMicroseconds: UInt64) {
        var running = pids.filter { pid in
            var status: Int32 = 0
            return waitpid(pid, &status, WNOHANG) == 0
        }
        for pid in running { kill(pid, SIGTERM) }
        var waited: UInt64 = 0
        while !running.isEmpty && waited < graceMicroseconds {
            usleep(pollMicroseconds)
            waited += UInt64(pollMicroseconds)
            running.removeAll { pid in
                var status: Int32 = 0
                return waitpid(pid, &status, WNOHANG) != 0
            }
        }
        for pid in running {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
    }
}
