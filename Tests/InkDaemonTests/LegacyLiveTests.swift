import Glibc
import InkBenchSupport
import InkCodec
import InkProtocol
import LegacyAppModel
import Testing

/// The real daemon, HYWhiteboard app models over real sockets: a teacher app draws a lesson,
/// student apps watch; every screen must equal the teacher's own (the model drawing alone).
@Suite struct LegacyLiveTests {
    /// Teacher + two students; the teacher performs `lines` at `speed`.
    static func lesson(_ tag: String, _ lines: [TraceLine], speed: Double, seed: UInt64) throws {
        let (daemon, port, _) = try LegacyApps.daemon(tag)
        defer { withExtendedLifetime(daemon) {} }
        let runner = LegacyAppRunner(seed: seed)
        let teacher = try runner.connect("teacher", port: port, configuration: LegacyApps.configuration(seed))
        let students = try (0..<2).map { try runner.connect("student-\($0)", port: port, configuration: LegacyApps.configuration(seed + UInt64($0) + 1)) }
        // The daemon sends nothing for 1 s while the apps' screens come up.
        teacher.script = LegacyApps.script(lines, runner: runner, delayMs: 1200, speed: speed)
        let duration = UInt64(Double((lines.last?.timeMs ?? 0) - (lines.first?.timeMs ?? 0)) / speed * 1000)
        runner.run(limitMicroseconds: duration + 1_500_000) { teacher.script?.isDone == true }
        let expected = LegacyTraceScript.referenceScreen(lines)
        let all = [teacher] + students
        let equal = LegacyApps.waitScreens(runner, all, equal: expected, limitMicroseconds: 15_000_000)
        for app in all {
            #expect(app.isConnected && app.model.desync == nil, "seed \(seed): \(app)")
            #expect(app.model.screen == expected, "seed \(seed) \(app.name): \(app.model.screen.difference(from: expected) ?? "")")
            #expect(app.model.touchesIgnored == 0, "\(app)")
        }
        #expect(equal)
        #expect(!daemon.log.contains("level=error"), "\(daemon.log)")
    }

    /// 20 s of the lesson's first minutes (its first characters, pen changes) at real speed.
    @Test func teacherAndTwoStudentsLiveAtRealSpeed() throws {
        guard let lines = LegacyApps.slice(0, 20_000) else { return }
        try Self.lesson("live-1x", lines, speed: 1, seed: 1)
    }
}

extension LegacyLiveTests {
    /// The lesson's first 5 minutes 20 s at 16 times (20 s): three clears, undo and redo, eraser
    /// strokes and pen changes; undo and clear overtake points still in the app's 60 ms buffer.
    @Test func teacherAndTwoStudentsLiveAtSixteenTimes() throws {
        guard let lines = LegacyApps.slice(0, 320_000) else { return }
        try Self.lesson("live-16x", lines, speed: 16, seed: 2)
    }

    /// Apps joining a lesson at four points (one after it ends) see the teacher's board.
    @Test func lateJoinersAtSeveralPointsOfALesson() throws {
        guard let lines = LegacyApps.slice(0, 240_000) else { return }
        let (daemon, port, _) = try LegacyApps.daemon("late-points")
        defer { withExtendedLifetime(daemon) {} }
        let runner = LegacyAppRunner(seed: 3)
        let teacher = try runner.connect("teacher", port: port, configuration: LegacyApps.configuration(3))
        teacher.script = LegacyApps.script(lines, runner: runner, delayMs: 1200, speed: 16)
        var joiners: [LegacyAppRunner.App] = []
        for (i, atMs) in [3_000, 7_000, 11_000].enumerated() {
            runner.run(limitMicroseconds: UInt64(atMs) * 1000 - min(UInt64(atMs) * 1000, UInt64(i) * 4_000_000)) { false }
            joiners.append(try runner.connect("late-\(i)", port: port, configuration: LegacyApps.configuration(UInt64(10 + i))))
        }
        runner.run(limitMicroseconds: 20_000_000) { teacher.script?.isDone == true }
        joiners.append(try runner.connect("after", port: port, configuration: LegacyApps.configuration(20)))
        let expected = LegacyTraceScript.referenceScreen(lines)
        #expect(LegacyApps.waitScreens(runner, [teacher] + joiners, equal: expected))
        for app in [teacher] + joiners {
            #expect(app.isConnected && app.model.desync == nil && app.model.screen == expected,
                    "\(app): \(app.model.screen.difference(from: expected) ?? "")")
        }
    }

    /// Two teacher apps drawing at the same time (15 s each, real speed) and a student: nobody
    /// loses more than 1 % of its touch samples, every screen has both teachers' lines, each
    /// teacher's in its order.
    @Test func twoTeacherAppsDrawingAtOnce() throws {
        guard let first = LegacyApps.slice(0, 15_000), let later = LegacyApps.slice(300_000, 315_000) else { return }
        let (daemon, port, _) = try LegacyApps.daemon("two-teachers")
        defer { withExtendedLifetime(daemon) {} }
        let runner = LegacyAppRunner(seed: 4)
        let a = try runner.connect("teacher-a", port: port, configuration: LegacyApps.configuration(4))
        let b = try runner.connect("teacher-b", port: port, configuration: LegacyApps.configuration(5))
        let student = try runner.connect("student", port: port, configuration: LegacyApps.configuration(6))
        a.script = LegacyApps.script(first, runner: runner, delayMs: 1200)
        b.script = LegacyApps.script(later, runner: runner, delayMs: 1250)
        runner.run(limitMicroseconds: 20_000_000) { a.script?.isDone == true && b.script?.isDone == true }
        let parts = [LegacyTraceScript.referenceScreen(first), LegacyTraceScript.referenceScreen(later)]
        let apps = [a, b, student]
        let done = runner.run(limitMicroseconds: 10_000_000) { apps.allSatisfy { $0.model.screen.interleaves(parts) } }
        #expect(done)
        for app in apps {
            #expect(app.isConnected && app.model.desync == nil && app.model.screen.interleaves(parts), "\(app): \(app.model.screen.explain(parts))")
            let touches = app.model.touchesAccepted + app.model.touchesIgnored
            #expect(app.model.touchesIgnored * 100 <= touches, "\(app.name) ignored \(app.model.touchesIgnored) of \(touches) touch samples")
        }
    }

    /// A native teacher (`inkwire send`) draws; legacy students see it exactly.
    @Test func nativeTeacherWithLegacyStudents() throws {
        guard let lines = LegacyApps.slice(0, 120_000) else { return }
        let (daemon, port, udp) = try LegacyApps.daemon("native-teacher")
        defer { withExtendedLifetime(daemon) {} }
        let runner = LegacyAppRunner(seed: 7)
        let students = try (0..<2).map { try runner.connect("student-\($0)", port: port, configuration: LegacyApps.configuration(7 + UInt64($0))) }
        runner.run(limitMicroseconds: 1_200_000)
        let trace = daemon.dataDir + "/native.csv"
        LegacyApps.writeTrace(lines, to: trace)
        let sender = try ClientProcess(["send", "--server", udp, "--room", "lesson", "--user", "teacher", "--role", "teacher",
                                        "--trace", trace, "--speed", "16"], directory: daemon.dataDir)
        let expected = LegacyTraceScript.referenceScreen(lines)
        runner.run(limitMicroseconds: 20_000_000) { sender.hasExited }
        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(LegacyApps.waitScreens(runner, students, equal: expected))
        for app in students { #expect(app.isConnected && app.model.desync == nil, "\(app): \(app.model.screen.difference(from: expected) ?? "")") }
    }

    /// A legacy teacher app draws; native students (`inkwire watch`) get exactly its drawing, and
    /// a legacy student sees it too.
    @Test func legacyTeacherWithNativeStudents() throws {
        guard let lines = LegacyApps.slice(0, 120_000) else { return }
        let (daemon, port, udp) = try LegacyApps.daemon("legacy-teacher")
        defer { withExtendedLifetime(daemon) {} }
        let watchers = try (0..<2).map {
            try ClientProcess(["watch", "--server", udp, "--room", "lesson", "--user", "native-\($0)", "--idle-exit", "3"], directory: daemon.dataDir)
        }
        for i in 0..<2 { #expect(ClientEndToEndTests.waitUntil { daemon.log.contains("user=native-\(i) ") }) }
        let runner = LegacyAppRunner(seed: 8)
        let teacher = try runner.connect("teacher", port: port, configuration: LegacyApps.configuration(8))
        let student = try runner.connect("student", port: port, configuration: LegacyApps.configuration(9))
        teacher.script = LegacyApps.script(lines, runner: runner, delayMs: 1200, speed: 16)
        runner.run(limitMicroseconds: 20_000_000) { teacher.script?.isDone == true }
        let expected = LegacyTraceScript.referenceScreen(lines)
        #expect(LegacyApps.waitScreens(runner, [teacher, student], equal: expected))
        for w in watchers {
            #expect(w.wait() == 0, "\(w.errors)")
            // The commands a native member got, played as the teacher's own actions: the same screen.
            let received = w.outputLines.compactMap { try? LegacyMessage(parsing: $0) }.map { TraceLine(timeMs: 0, message: $0) }
            #expect(received.count == w.outputLines.count)
            #expect(LegacyTraceScript.referenceScreen(received) == expected)
        }
    }

    /// An app in server mode, reached with `--legacy-connect`, gets the board; when it is
    /// restarted, inkwired connects again and the new screen gets the board too.
    @Test func serverModeAppThroughLegacyConnect() throws {
        guard let lines = LegacyApps.slice(0, 60_000) else { return }
        let runner = LegacyAppRunner(seed: 9)
        let server = try runner.listen("server-app", configuration: LegacyApps.configuration(9))
        let (daemon, port, _) = try LegacyApps.daemon("legacy-connect", extra: ["--legacy-connect", "127.0.0.1:\(server.listeningPort)=lesson"])
        defer { withExtendedLifetime(daemon) {} }
        #expect(daemon.log.contains("legacy_connect=\"127.0.0.1:\(server.listeningPort)=lesson\""), "\(daemon.log)")
        let teacher = try runner.connect("teacher", port: port, configuration: LegacyApps.configuration(10))
        teacher.script = LegacyApps.script(lines, runner: runner, delayMs: 1200, speed: 16)
        runner.run(limitMicroseconds: 15_000_000) { teacher.script?.isDone == true }
        let expected = LegacyTraceScript.referenceScreen(lines)
        #expect(LegacyApps.waitScreens(runner, [teacher, server], equal: expected))
        #expect(server.isConnected && server.model.desync == nil, "\(server)")
        // The app restarts: a new screen, and inkwired (backing off from 0.5 s) connects again.
        try runner.restart(server)
        #expect(LegacyApps.waitScreens(runner, [server], equal: expected, limitMicroseconds: 15_000_000), "\(server)")
        #expect(server.sessions.count == 2 && server.isConnected, "\(server)")
        #expect(daemon.log.contains("msg=\"legacy app connected\""))
    }
}
