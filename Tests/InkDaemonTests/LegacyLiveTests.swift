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
