import Testing
import InkBenchSupport

/// Two ENet members in one room through an in-process relay on 127.0.0.1, all serviced from the
/// test's thread (ENet hosts are single-threaded). Correctness only: exact bytes, exact order.
@Suite(.serialized) struct ENetRelayTests {
    /// Services relay and members until `done()` holds or the bound passes; returns `done()`.
    func pump(_ relay: ENetRelayServer, _ members: [ENetMember], until done: () -> Bool) -> Bool {
        let deadline = ENetRuntime.nowNanoseconds() + 5_000_000_000
        while !done(), ENetRuntime.nowNanoseconds() < deadline {
            relay.service(timeoutMs: 1)
            for member in members { member.service(timeoutMs: 0) }
        }
        return done()
    }

    @Test func relaysExactBatchesInOrderToTheOtherMember() throws {
        let relay = try ENetRelayServer(port: 0)
        #expect(relay.port != 0)
        let drawer = try ENetMember(port: relay.port) { relay.service(timeoutMs: 0) }
        let watcher = try ENetMember(port: relay.port) { relay.service(timeoutMs: 0) }
        try drawer.join(room: "lesson-a") { relay.service(timeoutMs: 0) }
        try watcher.join(room: "lesson-a") { relay.service(timeoutMs: 0) }
        #expect(relay.memberCount(in: "lesson-a") == 2)

        let batches: [[UInt8]] = (0..<200).map { index in
            [UInt8(index & 0xFF), UInt8(index >> 8)] + Array(repeating: UInt8(truncatingIfNeeded: index * 7), count: index % 50)
        } + [[], Array(repeating: 0xAB, count: 4000)]
        for batch in batches { try drawer.send(batch: batch) }
        var delivered: [[UInt8]] = []
        let complete = pump(relay, [drawer, watcher]) {
            delivered += watcher.takeReceived().map(\.bytes)
            return delivered.count >= batches.count
        }
        #expect(complete)
        #expect(delivered == batches)
        #expect(drawer.takeReceived().isEmpty)
        #expect(relay.stats.batchesIn == batches.count)
        #expect(relay.stats.packetsOut == batches.count)
    }

    @Test func keepsRoomsApartAndRefusesBatchesBeforeJoin() throws {
        let relay = try ENetRelayServer(port: 0)
        let alice = try ENetMember(port: relay.port) { relay.service(timeoutMs: 0) }
        let bob = try ENetMember(port: relay.port) { relay.service(timeoutMs: 0) }
        let carol = try ENetMember(port: relay.port) { relay.service(timeoutMs: 0) }
        #expect(throws: ENetError.notJoined) { try alice.send(batch: [1]) }
        try alice.join(room: "a") { relay.service(timeoutMs: 0) }
        try bob.join(room: "a") { relay.service(timeoutMs: 0) }
        try carol.join(room: "b") { relay.service(timeoutMs: 0) }
        try bob.send(batch: [9, 8, 7])
        try carol.send(batch: [5])
        var toAlice: [[UInt8]] = []
        #expect(pump(relay, [alice, bob, carol]) {
            toAlice += alice.takeReceived().map(\.bytes)
            return !toAlice.isEmpty && relay.stats.batchesIn == 2
        })
        #expect(toAlice == [[9, 8, 7]])
        #expect(bob.takeReceived().isEmpty)
        #expect(carol.takeReceived().isEmpty)
    }
}

/// The relay on its own thread, members on the test's thread, as an in-process harness runs it.
@Test func relayThreadFansOutToEveryOtherMemberInJoinOrder() throws {
    let relay = try ENetRelayThread()
    let drawer = try ENetMember(port: relay.port)
    let watchers = try (0..<3).map { _ in try ENetMember(port: relay.port) }
    try drawer.join(room: "r")
    for watcher in watchers { try watcher.join(room: "r") }
    let batches: [[UInt8]] = (0..<100).map { [UInt8($0), 0xEE, UInt8(255 - $0)] }
    for batch in batches { try drawer.send(batch: batch) }
    var delivered: [[[UInt8]]] = Array(repeating: [], count: watchers.count)
    let deadline = ENetRuntime.nowNanoseconds() + 5_000_000_000
    while delivered.contains(where: { $0.count < batches.count }), ENetRuntime.nowNanoseconds() < deadline {
        drawer.service(timeoutMs: 0)
        for (index, watcher) in watchers.enumerated() {
            watcher.service(timeoutMs: 1)
            delivered[index] += watcher.takeReceived().map(\.bytes)
        }
    }
    for received in delivered { #expect(received == batches) }
    let stats = relay.stop()
    #expect(stats.joins == 4)
    #expect(stats.batchesIn == batches.count)
    #expect(stats.packetsOut == batches.count * watchers.count)
}
