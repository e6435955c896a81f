import InkCodec
import InkLegacy
import InkProtocol
import LegacyAppModel
import Testing

/// Live lessons in virtual time: one teacher app drawing a trace, student apps watching.
@Suite struct LiveSimulationTests {
    /// Runs `lines` on a teacher app at `speed` with `students` watching; returns the sim.
    static func lesson(_ lines: [TraceLine], speed: Double, students: Int, seed: UInt64,
                       configure: (inout LegacyRoomSimulation.Configuration) -> Void = { _ in }) -> LegacyRoomSimulation {
        var config = LegacyRoomSimulation.Configuration()
        configure(&config)
        let sim = LegacyRoomSimulation(seed: seed, configuration: config)
        let teacher = sim.connectApp("teacher")
        for i in 0..<students { sim.connectApp("student-\(i)") }
        // The user starts once the screen is up (at most 0.4 s) and the session sends (1 s).
        teacher.script = LegacyTraceScript(lines, start: .milliseconds(1500), speed: speed)
        let duration = Double((lines.last?.timeMs ?? 0) - (lines.first?.timeMs ?? 0)) / speed / 1000
        sim.runToQuiet(limit: .milliseconds(UInt64(duration * 1000) + 60_000))
        return sim
    }

    static func check(_ sim: LegacyRoomSimulation, _ expected: LegacyAppScreen, seed: UInt64) {
        for d in sim.devices {
            #expect(d.app.state == .connected && d.app.desync == nil && d.sessionClosed == nil, "seed \(seed): \(d)")
            #expect(d.app.screen == expected, "seed \(seed) \(d.name): \(d.app.screen.difference(from: expected) ?? "")")
            #expect(d.app.touchesIgnored == 0, "seed \(seed): \(d)")
        }
    }

    @Test func teacherAndTwoStudentsAtRealSpeed() {
        guard let lines = lessonSlice(0, 60_000) else { return }
        let expected = LegacyTraceScript.referenceScreen(lines)
        for seed in propertySeeds(3) { Self.check(Self.lesson(lines, speed: 1, students: 2, seed: seed), expected, seed: seed) }
    }

    @Test func teacherAndTwoStudentsAtSixteenTimes() {
        guard let lines = lessonLines else { return }
        let expected = LegacyTraceScript.referenceScreen(lines)
        for seed in propertySeeds(3) { Self.check(Self.lesson(lines, speed: 16, students: 2, seed: seed), expected, seed: seed) }
    }
}

extension LiveSimulationTests {
    @Test func twoTeachersDrawingAtOnce() {
        guard let first = lessonSlice(0, 15_000), let later = lessonSlice(300_000, 315_000) else { return }
        let parts = [LegacyTraceScript.referenceScreen(first), LegacyTraceScript.referenceScreen(later)]
        for seed in propertySeeds(3) {
            let sim = LegacyRoomSimulation(seed: seed)
            let a = sim.connectApp("a")
            let b = sim.connectApp("b")
            sim.connectApp("student")
            a.script = LegacyTraceScript(first, start: .milliseconds(1500))
            b.script = LegacyTraceScript(later, start: .milliseconds(1550))
            sim.runToQuiet(limit: .milliseconds(60_000))
            for d in sim.devices {
                #expect(d.app.screen.interleaves(parts), "seed \(seed) \(d.name): \(d.app.screen.explain(parts)) \(d)")
                let touches = d.app.touchesAccepted + d.app.touchesIgnored
                #expect(d.app.touchesIgnored * 100 <= touches, "seed \(seed): \(d)")
            }
        }
    }
}
