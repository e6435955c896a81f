import InkCodec
import InkLegacy
import InkProtocol
import LegacyAppModel
import Testing

/// Late joiners in virtual time: the room's board reaches an app model with its real reader.
@Suite struct LateJoinSimulationTests {
    @Test func aLateJoinerGetsTheFirstTwoMinutesExactly() throws {
        guard let lines = lessonSlice(0, 120_000) else { return }
        let expected = LegacyTraceScript.referenceScreen(lines)
        for seed in propertySeeds(5) {
            let sim = LegacyRoomSimulation(seed: seed)
            sim.preload(lines)
            let app = sim.connectApp("late")
            app.target = expected
            sim.run(until: .milliseconds(30_000)) { app.reachedAt != nil }
            #expect(app.app.desync == nil, "seed \(seed): \(app)")
            #expect(app.app.screen == expected, "seed \(seed): \(app.app.screen.difference(from: expected) ?? "") \(app)")
        }
    }
}
