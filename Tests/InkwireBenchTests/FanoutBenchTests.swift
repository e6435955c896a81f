import Testing
@testable import inkwire_bench

/// The fanout harness end to end against the real inkwired (2 rooms x 3 members, 2 s): every
/// watcher gets every batch of its room exactly once, in order, with the commands drawn, and
/// the JSON line carries the fields the benchmark promises. Speed is not checked.
@Test func fanoutSmokeRunDeliversEverythingAndReports() {
    var shape = FanoutShape(rooms: 2, members: 3)
    shape.durationSeconds = 2
    shape.warmupSeconds = 0.5
    let lines = FanoutWorkload.syntheticLines()
    let result = fanoutOnce(shape, lines: lines, seed: 7) { _ in }
    #expect(result.failure == nil, "\(result.failure ?? "")")
    #expect(result.completeness == 1.0)
    #expect(result.errors == 0)
    #expect(result.batches > 0)
    // Each batch reaches the two watchers of its room.
    #expect(result.deliveries == result.batches * 2)
    let json = result.json
    for field in ["sessions", "rooms", "members", "cpu_percent", "rss_mb", "added_p50_ms", "added_p99_ms", "completeness"] {
        #expect(json.contains("\"\(field)\":"), "\(field) missing in \(json)")
    }
    #expect(json.hasPrefix("{\"bench\":\"fanout\",\"sealing\":\"on\",\"sessions\":6,\"rooms\":2,\"members\":3,"))
    #expect(json.contains("\"completeness\":1.0,"))
}

/// The workload cuts the lesson into 60 ms batches due at the end of their window, and a
/// schedule started mid-lesson plays from there.
@Test func fanoutWorkloadIsCutAtLessonRate() {
    let workload = FanoutWorkload(lines: FanoutWorkload.syntheticLines(), copies: 2)
    #expect(!workload.batches.isEmpty)
    for (batch, due) in zip(workload.batches, workload.dueMicroseconds) {
        #expect(batch.allSatisfy { $0.timeMs / 60 == batch[0].timeMs / 60 })
        #expect(due == (batch[0].timeMs / 60 + 1) * 60_000)
    }
    #expect(zip(workload.dueMicroseconds, workload.dueMicroseconds.dropFirst()).allSatisfy { $0.0 < $0.1 })
    var schedule = FanoutSchedule(workload: workload, phase: workload.loopMicroseconds / 2)
    let first = schedule.next
    #expect(workload.dueMicroseconds[first] >= workload.loopMicroseconds / 2)
    #expect(schedule.due(elapsed: 0) == nil || workload.dueMicroseconds[first] == workload.loopMicroseconds / 2)
    #expect(schedule.due(elapsed: 120_000) != nil || first == workload.batches.count)
}
