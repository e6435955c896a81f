import Glibc

/// Starts a child process for the end-to-end tests: one place that knows posix_spawn.
enum ChildSpawn {
    /// Where one of the child's standard descriptors goes.
    enum Redirect {
        /// Opened by the child's side: read-only for fd 0, created and truncated otherwise.
        case file(String)
        /// A copy of another of the child's descriptors (e.g. stderr into stdout).
        case descriptor(Int32)
    }

    /// Spawns `argv[0]` (a path, not searched) with exactly `environment`. `redirects` apply in
    /// order; `inherited` descriptors become 3, 4, ... in the child. The test runner's threads may
    /// block or ignore signals, so the child starts with an empty mask and default handlers.
    static func spawn(_ argv: [String], environment: [String: String], redirects: [(Int32, Redirect)],
                      inherited: [Int32] = []) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, target) in redirects {
            switch target {
            case .file(let path):
                let flags = fd == 0 ? O_RDONLY : (O_WRONLY | O_CREAT | O_TRUNC)
                posix_spawn_file_actions_addopen(&actions, fd, path, flags, 0o600)
            case .descriptor(let source):
                posix_spawn_file_actions_adddup2(&actions, source, fd)
            }
        }
        for (index, fd) in inherited.enumerated() { posix_spawn_file_actions_adddup2(&actions, fd, 3 + Int32(index)) }
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
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
        return child
    }
}
