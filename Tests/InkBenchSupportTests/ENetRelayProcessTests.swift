import Glibc
import InkBenchSupport
import Testing

/// `inkwire-bench enet-relay` as a real child process, as the loss harness starts it: it prints
/// `ready port=N`, relays between two members, and on SIGTERM prints its counters and exits 0.
@Test func enetRelaySubcommandRelaysAndStopsCleanly() throws {
    // The benchmark binary sits next to the test bundle; skip when it was not built.
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let exe = count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    let binary = exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/inkwire-bench"
    guard access(binary, X_OK) == 0 else { return }

    var pipeEnds: [Int32] = [0, 0]
    try #require(pipe(&pipeEnds) == 0)
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
    let argv = [binary, "enet-relay", "--listen", "127.0.0.1:0"]
    var cArgs = argv.map { strdup($0) } + [nil]
    defer { for pointer in cArgs { free(pointer) } }
    var child = pid_t()
    // The test runner may block SIGTERM; the child must start with default signal handling.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    var all = sigset_t()
    sigemptyset(&empty)
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    try #require(posix_spawn(&child, binary, &actions, &attributes, &cArgs, environ) == 0)
    close(pipeEnds[1])
    defer { close(pipeEnds[0]) }

    /// Reads the child's stdout until a whole line starts with `marker` (returns the rest), or 10 s pass.
    var output: [UInt8] = []
    func readUntil(_ marker: String) -> String? {
        let deadline = ENetRuntime.nowNanoseconds() + 10_000_000_000
        while ENetRuntime.nowNanoseconds() < deadline {
            let complete = output.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast()
            for line in complete.map({ String(decoding: $0, as: UTF8.self) }) where line.hasPrefix(marker) {
                return String(line.dropFirst(marker.count))
            }
            var poller = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 512)
            if poller.revents != 0 {
                let got = read(pipeEnds[0], &chunk, chunk.count)
                if got <= 0 { return nil }
                output += chunk[..<got]
            }
        }
        return nil
    }

    let portText = readUntil("ready port=")
    let port = try #require(portText.flatMap { UInt16($0) })
    let sent: [[UInt8]] = (0..<20).map { [UInt8($0), 1, 2, 3] }
    var delivered: [[UInt8]] = []
    do {
        let drawer = try ENetMember(port: port)
        let watcher = try ENetMember(port: port)
        try drawer.join(room: "proc")
        try watcher.join(room: "proc")
        for batch in sent { try drawer.send(batch: batch) }
        let deadline = ENetRuntime.nowNanoseconds() + 5_000_000_000
        while delivered.count < sent.count, ENetRuntime.nowNanoseconds() < deadline {
            drawer.service(timeoutMs: 0)
            watcher.service(timeoutMs: 1)
            delivered += watcher.takeReceived().map(\.bytes)
        }
    }
    kill(child, SIGTERM)
    let stopped = readUntil("stopped ")
    // Bounded wait: a relay that ignores SIGTERM is killed and the test fails instead of hanging.
    var status: Int32 = -1
    let exitDeadline = ENetRuntime.nowNanoseconds() + 5_000_000_000
    while waitpid(child, &status, WNOHANG) == 0 {
        if ENetRuntime.nowNanoseconds() > exitDeadline {
            kill(child, SIGKILL)
            waitpid(child, &status, 0)
            status = -1
            break
        }
        usleep(10_000)
    }
    #expect(delivered == sent)
    #expect(stopped?.hasPrefix("joins=2 batches_in=20 packets_out=20 ") == true)
    #expect(status == 0)
}
