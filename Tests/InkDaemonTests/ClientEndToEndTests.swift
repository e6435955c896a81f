import Glibc
import InkBenchSupport
import LegacyAppModel
import InkCodec
@testable import InkDaemon
import Testing

/// The real `inkwire` CLI against the real `inkwired` on loopback.
@Suite struct ClientEndToEndTests {
    /// Lines of lesson-a played in these tests (82 s of lesson, up to a stroke's end) and the
    /// speed-up (about 1 s).
    static let traceLines = 1997
    static let speed = "100"

    struct Daemon {
        let process: DaemonProcess
        let udp: String
        let tcp: String
        let legacyPort: UInt16
        var directory: String { process.dataDir }
    }

    static func start(_ tag: String, extra: [String] = []) throws -> Daemon {
        let process = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=legacy-room"] + extra, tag: tag)
        let fields = try process.ready()
        return Daemon(process: process, udp: "udp://" + fields["udp"]!, tcp: "tcp://" + fields["tcp"]!, legacyPort: process.legacyPort(fields))
    }

    /// The first `traceLines` lines of ../shared/traces/lesson-a.csv, written to `directory`;
    /// nil when the shared traces are absent.
    static func lessonTrace(in directory: String) -> (path: String, lines: [String])? {
        let root = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/"))
        // Next to the package, or next to the worktree folder.
        let candidates = ["/../shared/traces/lesson-a.csv", "/../../shared/traces/lesson-a.csv"].map { readFile(root + $0) }
        guard let text = candidates.first(where: { !$0.isEmpty }) else {
            print("ClientEndToEndTests: ../shared/traces/lesson-a.csv not found; skipped")
            return nil
        }
        let lines = text.split(separator: UInt8(ascii: "\n")).prefix(traceLines).map { String(decoding: $0, as: UTF8.self) }
        let path = directory + "/lesson.csv"
        writeFile(path, Array(lines.map { $0 + "\n" }.joined().utf8))
        return (path, lines)
    }

    /// The legacy messages of trace lines (their time stripped).
    static func messages(_ lines: [String]) -> [String] {
        lines.map { String($0.drop(while: { $0 != "," }).dropFirst()) }
    }

    static func waitJoined(_ d: Daemon, room: String, user: String) -> Bool {
        waitUntil { d.process.log.split(separator: "\n").contains { $0.contains("member joined") && $0.contains("room=\(room) ") && $0.contains("user=\(user) ") } }
    }

    static func waitUntil(limitMicroseconds: UInt64 = 10_000_000, _ condition: () -> Bool) -> Bool {
        let deadline = monotonicMicroseconds() + limitMicroseconds
        while !condition() {
            if monotonicMicroseconds() > deadline { return false }
            usleep(10_000)
        }
        return true
    }

    @Test func nativeSenderReachesUDPTCPAndLegacyWatchersExactlyInOrder() throws {
        let d = try Self.start("cli-fanout")
        guard let trace = Self.lessonTrace(in: d.directory) else { return }
        let expected = Self.messages(trace.lines)
        let count = String(expected.count)
        let watchers = try [
            ClientProcess(["watch", "--server", d.udp, "--room", "legacy-room", "--user", "w1", "--count", count, "--idle-exit", "10"], directory: d.directory),
            ClientProcess(["watch", "--server", d.tcp, "--room", "legacy-room", "--user", "w2", "--count", count, "--idle-exit", "10"], directory: d.directory),
            ClientProcess(["watch", "--server", d.udp, "--room", "legacy-room", "--user", "w3", "--format", "json", "--count", count, "--idle-exit", "10"], directory: d.directory),
        ]
        for user in ["w1", "w2", "w3"] { #expect(Self.waitJoined(d, room: "legacy-room", user: user)) }
        // A HYWhiteboard app in the same room (the daemon's legacy listener is bound to it).
        let runner = LegacyAppRunner(seed: 51)
        let app = try runner.connect("app", port: d.legacyPort)
        #expect(Self.waitUntil { d.process.log.contains("user=legacy-") })
        let sender = try ClientProcess(["send", "--server", d.udp, "--room", "legacy-room", "--user", "teacher", "--trace", trace.path, "--speed", Self.speed], directory: d.directory)
        // The app keeps running (reading, its timers) while the others do.
        runner.run(limitMicroseconds: 30_000_000) { ([sender] + watchers).allSatisfy { $0.hasExited } }
        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(sender.errors.contains("acknowledged"))
        for w in watchers { #expect(w.wait() == 0, "\(w.errors)") }
        #expect(watchers[0].outputLines == expected)
        #expect(watchers[1].outputLines == expected)
        let drawn = LegacyTraceScript.referenceScreen(try Trace.parse(Array((trace.lines.joined(separator: "\n") + "\n").utf8)))
        #expect(LegacyApps.waitScreens(runner, [app], equal: drawn), "\(app): \(app.model.screen.difference(from: drawn) ?? "")")
        // JSON: one object per command, the trace's own times, room order.
        let json = watchers[2].outputLines
        #expect(json.count == expected.count)
        let times = json.compactMap { line -> String? in
            guard let r = line.range(of: "\"t\":") else { return nil }
            return String(line[r.upperBound...].prefix { $0.isNumber })
        }
        #expect(times == trace.lines.map { String($0.prefix { $0 != "," }) })
    }

    /// A watcher whose goodbye is never acknowledged (the daemon stalls, as a loaded machine's
    /// may for longer than the client's 300 ms linger) still exits: its timer, re-armed for the
    /// passed linger deadline, once spun in libuv's timer pass forever (UDP watchers that never
    /// exited after printing everything).
    @Test func aUDPWatcherExitsWhenItsGoodbyeIsNeverAcknowledged() throws {
        let d = try Self.start("cli-linger")
        let trace = d.directory + "/tiny.csv"
        writeFile(trace, Array("0,1,0.100000,0.100000,1\n16,1,0.200000,0.200000,3\n".utf8))
        let watcher = try ClientProcess(["watch", "--server", d.udp, "--room", "r", "--user", "w", "--count", "3", "--idle-exit", "1"],
                                        directory: d.directory)
        #expect(Self.waitJoined(d, room: "r", user: "w"))
        let sender = try ClientProcess.run(["send", "--server", d.tcp, "--room", "r", "--user", "t", "--trace", trace], directory: d.directory)
        #expect(sender.exitStatus == 0, "\(sender.errors)")
        // Both points printed: the watcher holds a joined session. Then nothing answers it.
        #expect(Self.waitUntil { watcher.outputLines.count == 2 })
        d.process.signal(SIGSTOP)
        defer { d.process.signal(SIGCONT) }
        #expect(watcher.wait(limitMicroseconds: 10_000_000) == 0, "\(watcher.errors)")
        #expect(watcher.outputLines == ["1,0.100000,0.100000,1", "1,0.200000,0.200000,3"])
    }

    @Test func legacySenderReachesANativeWatcher() throws {
        let d = try Self.start("cli-legacy")
        let watcher = try ClientProcess(["watch", "--server", d.tcp, "--room", "legacy-room", "--user", "w", "--count", "4", "--idle-exit", "10"], directory: d.directory)
        #expect(Self.waitJoined(d, room: "legacy-room", user: "w"))
        let runner = LegacyAppRunner(seed: 52)
        let app = try runner.connect("app", port: d.legacyPort)
        #expect(LegacyApps.waitUp(runner, [app]))
        LegacyApps.draw(DaemonLegacyTests.stroke, on: app, runner)
        #expect(watcher.wait() == 0, "\(watcher.errors)")
        #expect(watcher.outputLines == DaemonLegacyTests.stroke)
    }

    @Test func viewerSendingIsRefusedWithExitCode5() throws {
        let d = try Self.start("cli-viewer")
        let trace = d.directory + "/tiny.csv"
        writeFile(trace, Array("0,1,0.100000,0.100000,1\n16,1,0.200000,0.200000,3\n".utf8))
        let p = try ClientProcess.run(["send", "--server", d.udp, "--room", "r", "--user", "v", "--role", "viewer", "--trace", trace], directory: d.directory)
        #expect(p.exitStatus == 5)
        #expect(p.errors.contains("permissionDenied") && p.errors.contains("viewers may not draw"), "\(p.errors)")
    }

    @Test func aUserSendingAgainIsTheSameAuthorWithNewStrokes() throws {
        let d = try Self.start("cli-again")
        let trace = d.directory + "/line.csv"
        writeFile(trace, Array("0,1,0.100000,0.100000,1\n16,1,0.200000,0.200000,3\n".utf8))
        for _ in 0..<2 {
            let p = try ClientProcess.run(["send", "--server", d.udp, "--room", "r", "--user", "ada", "--trace", trace, "--speed", "10"], directory: d.directory)
            #expect(p.exitStatus == 0, "\(p.errors)")
        }
        let late = try ClientProcess.run(["watch", "--server", d.tcp, "--room", "r", "--user", "late", "--format", "json", "--idle-exit", "0.5"], directory: d.directory)
        let points = late.outputLines.filter { $0.contains("\"cmd\":\"point\"") }
        let strokes = points.compactMap { $0.split(separator: ",").first { $0.hasPrefix("\"stroke\":") } }.map(String.init)
        let authors = Set(points.compactMap { $0.split(separator: ",").first { $0.hasPrefix("\"author\":") } }.map(String.init))
        #expect(strokes == ["\"stroke\":1", "\"stroke\":1", "\"stroke\":2", "\"stroke\":2"], "\(late.output)")
        #expect(authors.count == 1)
        // The same user watching from another device sees its own strokes too.
        let own = try ClientProcess.run(["watch", "--server", d.udp, "--room", "r", "--user", "ada", "--idle-exit", "0.5"], directory: d.directory)
        let line = ["1,0.100000,0.100000,1", "1,0.200000,0.200000,3"]
        #expect(own.outputLines == line + line, "\(own.errors)")
    }

    @Test func tokensAreRequiredWhenTheDaemonHasASecret() throws {
        let directory = DaemonProcess.scratchDirectory("cli-token")
        defer { _ = system("rm -rf '\(directory)'") }
        let secret = Array("a-school-secret-of-enough-bytes".utf8)
        writeFile(directory + "/secret", secret)
        let d = try Self.start("cli-token", extra: ["--token-secret-file", directory + "/secret"])
        let bad = try ClientProcess.run(["watch", "--server", d.tcp, "--room", "r", "--user", "ada", "--token", "iw1.bogus.bogus"], directory: d.directory)
        #expect(bad.exitStatus == 4)
        #expect(bad.errors.contains("join refused (badToken)"), "\(bad.errors)")
        let none = try ClientProcess.run(["watch", "--server", d.udp, "--room", "r", "--user", "ada"], directory: d.directory)
        #expect(none.exitStatus == 4)
        let token = TokenVerifier(secret: secret)!.mint(JoinClaims(room: "r", user: "ada", role: .viewer, expiresAt: 4_000_000_000))
        let good = try ClientProcess.run(["watch", "--server", d.udp, "--room", "r", "--user", "ada", "--token", token, "--idle-exit", "0.2"], directory: d.directory)
        #expect(good.exitStatus == 0, "\(good.errors)")
    }

    @Test func unreachableServersAndBadArgumentsHaveTheirOwnExitCodes() throws {
        let directory = DaemonProcess.scratchDirectory("cli-errors")
        defer { _ = system("rm -rf '\(directory)'") }
        let udp = try ClientProcess.run(["watch", "--server", "udp://127.0.0.1:9", "--room", "r", "--timeout", "1"], directory: directory)
        #expect(udp.exitStatus == 3, "\(udp.errors)")
        let tcp = try ClientProcess.run(["watch", "--server", "tcp://127.0.0.1:9", "--room", "r", "--timeout", "1"], directory: directory)
        #expect(tcp.exitStatus == 3, "\(tcp.errors)")
        let bad = try ClientProcess.run(["watch", "--server", "http://x", "--room", "r"], directory: directory)
        #expect(bad.exitStatus == 2)
        let help = try ClientProcess.run(["--help"], directory: directory)
        #expect(help.exitStatus == 0 && help.output.contains("3  server unreachable"))
    }

    @Test func roamingSenderKeepsItsSessionFromANewPort() throws {
        let d = try Self.start("cli-roam")
        guard let trace = Self.lessonTrace(in: d.directory) else { return }
        let expected = Self.messages(trace.lines)
        let watcher = try ClientProcess(["watch", "--server", d.tcp, "--room", "r", "--user", "w", "--count", String(expected.count), "--idle-exit", "10"], directory: d.directory)
        #expect(Self.waitJoined(d, room: "r", user: "w"))
        let sender = try ClientProcess.run(["send", "--server", d.udp, "--room", "r", "--user", "t", "--trace", trace.path, "--speed", Self.speed, "--roam-after", "5"], directory: d.directory)
        #expect(sender.exitStatus == 0, "\(sender.errors)")
        #expect(d.process.log.contains("session moved"))
        #expect(watcher.wait() == 0)
        #expect(watcher.outputLines == expected)
    }

    @Test func clientsGetTheirSessionsBackAfterADaemonRestart() throws {
        let first = try Self.start("cli-restart")
        guard let trace = Self.lessonTrace(in: first.directory) else { return }
        let expected = Self.messages(trace.lines)
        let count = String(expected.count)
        let watchers = try [first.udp, first.tcp].enumerated().map { i, server in
            try ClientProcess(["watch", "--server", server, "--room", "r", "--user", "w\(i)", "--count", count, "--idle-exit", "20"], directory: first.directory)
        }
        for i in 0..<2 { #expect(Self.waitJoined(first, room: "r", user: "w\(i)")) }
        let sender = try ClientProcess(["send", "--server", first.udp, "--room", "r", "--user", "t", "--trace", trace.path, "--speed", "40"], directory: first.directory)
        #expect(Self.waitUntil { first.process.log.contains("user=t ") })
        usleep(700_000)
        first.process.signal(SIGTERM)
        #expect(first.process.waitExit() == 0)
        // The same ports and room log: the clients rejoin and resend what was not durable.
        let second = try DaemonProcess(["--udp", String(first.udp.dropFirst(6)), "--tcp", String(first.tcp.dropFirst(6))],
                                       dataDir: first.directory, tag: "cli-restart")
        _ = try second.ready()
        #expect(sender.wait() == 0, "\(sender.errors)")
        for w in watchers {
            #expect(w.wait() == 0, "\(w.errors)")
            #expect(w.outputLines == expected)
        }
        withExtendedLifetime(first) {}
    }

    @Test func lateJoinerGetsTheWholeBoardAndExportReplaysWithOriginalTimes() throws {
        let d = try Self.start("cli-late")
        guard let trace = Self.lessonTrace(in: d.directory) else { return }
        let sender = try ClientProcess.run(["send", "--server", d.udp, "--room", "a", "--user", "t", "--trace", trace.path, "--speed", Self.speed], directory: d.directory)
        #expect(sender.exitStatus == 0, "\(sender.errors)")

        // A late joiner syncs the board; its digest is the trace folded by its author.
        let late = try ClientProcess.run(["watch", "--server", d.tcp, "--room", "a", "--user", "late", "--format", "json", "--idle-exit", "1"], directory: d.directory)
        #expect(late.exitStatus == 0, "\(late.errors)")
        let firstLine = try #require(late.outputLines.first)
        let field = try #require(firstLine.split(separator: ",").first { $0.hasPrefix("\"author\":") })
        let author = try #require(UInt32(field.dropFirst("\"author\":".count)))
        var translator = LegacyTranslator(author: AuthorID(author))
        var board = Board()
        let lines = try Trace.parse(readFile(trace.path))
        board.apply(Batch(author: AuthorID(author), commands: lines.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }))
        #expect(late.errors.contains("board digest \(String(board.digest, radix: 16)) matches the server"), "\(late.errors)")

        // Export keeps the trace byte for byte; replayed into another room it exports the same.
        let exported = try ClientProcess.run(["export", "--server", d.udp, "--room", "a", "--format", "trace"], directory: d.directory)
        #expect(exported.exitStatus == 0, "\(exported.errors)")
        #expect(readFile(exported.outPath) == readFile(trace.path))
        let replay = try ClientProcess.run(["send", "--server", d.tcp, "--room", "b", "--user", "t", "--trace", exported.outPath, "--speed", Self.speed], directory: d.directory)
        #expect(replay.exitStatus == 0, "\(replay.errors)")
        let again = try ClientProcess.run(["export", "--server", d.tcp, "--room", "b", "--format", "trace"], directory: d.directory)
        #expect(readFile(again.outPath) == readFile(trace.path))
    }
}
