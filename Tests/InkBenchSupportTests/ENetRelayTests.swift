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
