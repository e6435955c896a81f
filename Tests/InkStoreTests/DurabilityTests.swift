import Foundation
import Testing
@testable import InkStore

/// Acknowledge only what is durable: marks come after the commit, never before.
@Suite struct DurabilityTests {
    @Test func nothingIsReportedDurableBeforeItIsCommitted() throws {
        let disk = MemoryRoomLogStore.Disk()
        var store = MemoryRoomLogStore(disk: disk, holdDurability: true)
        for seq in UInt64(1)...3 { _ = try store.append(batch("r", originSeq: seq)) }
        #expect(store.pollDurable() == [])
        #expect(store.room("r")?.durableRoomSeq == 0 && store.room("r")?.lastRoomSeq == 3)
        #expect(try readAll(store, "r").count == 3)  // readers see it already
        store.commitHeld()
        #expect(store.pollDurable() == [DurableMark(room: "r", roomSeq: 3)])
        _ = try store.append(batch("r", originSeq: 4))
        // A crash now: the store object is dropped without committing; the disk keeps 1...3.
        store = MemoryRoomLogStore(disk: disk)
        #expect(store.room("r")?.lastRoomSeq == 3)
        #expect(try store.append(batch("r", originSeq: 4)) == .appended(roomSeq: 4))
    }

    @Test func backlogBoundRefusesAppendsWithAClearError() throws {
        var limits = StoreLimits()
        limits.maxPendingOps = 3
        let store = MemoryRoomLogStore(limits: limits, holdDurability: true)
        _ = try store.append(batch("r", originSeq: 1))  // create + append
        _ = try store.append(batch("r", originSeq: 2))
        #expect(throws: StoreError.backlogFull(pendingOps: 3, pendingBytes: 1 + 2 * 8 + testPayload(room: "r", seq: 1).count + testPayload(room: "r", seq: 2).count, lastFailure: nil)) {
            try store.append(batch("r", originSeq: 3))
        }
        #expect(store.usage.refusedAppends == 1)
        try store.flush()
        #expect(try store.append(batch("r", originSeq: 3)) == .appended(roomSeq: 3))
    }

    @Test func aFullMemoryDiskIsReportedRetriedAndRecovered() throws {
        let disk = MemoryRoomLogStore.Disk(capacityBytes: 1000)
        var limits = StoreLimits()
        limits.maxPendingOps = 10
        var store = MemoryRoomLogStore(disk: disk, limits: limits)
        try DiskFullScenario.run(store: store, payloadBytes: 100, grow: { disk.capacityBytes = nil; return true })
        store = MemoryRoomLogStore(disk: disk, limits: limits)
        try DiskFullScenario.verify(store: store)
    }
}

/// Fill the disk, check the failure is reported and the backlog refuses appends, free space,
/// check the retried writes become durable. Shared by the memory and the real-disk test.
enum DiskFullScenario {
    static let room = "full"

    static func payload(_ seq: UInt64, _ bytes: Int) -> [UInt8] { testPayload(room: room, seq: seq, length: bytes) }

    static func run(store: RoomLogStore, payloadBytes: Int, grow: () throws -> Bool) throws {
        var seq: UInt64 = 0
        var sawFull = false
        var refused: StoreError?
        while refused == nil && seq < 10_000 {
            do {
                _ = try store.append(batch(room, originSeq: seq + 1, payload: payload(seq + 1, payloadBytes)))
                seq += 1
            } catch {
                refused = error
                break
            }
            if !sawFull {
                do { try store.flush() } catch { sawFull = error.isDiskFull }
            }
        }
        #expect(sawFull, "the full disk was never reported")
        let failures = store.pollFailures()
        #expect(!failures.isEmpty && failures.allSatisfy(\.isDiskFull), "\(failures.prefix(2))")
        #expect(store.usage.diskFullErrors >= 1)
        guard case .backlogFull(_, _, let lastFailure)? = refused else {
            Issue.record("expected backlogFull, got \(String(describing: refused))")
            return
        }
        #expect(lastFailure?.contains("full") == true, "\(lastFailure ?? "nil")")
        let durableBefore = store.room(room)?.durableRoomSeq ?? 0
        #expect(durableBefore < seq)
        // `grow` says whether space came back under the running store (else only reopen helps).
        guard try grow() else { return }
        let deadline = ContinuousClock.now + .seconds(20)
        var flushed = false
        while !flushed && ContinuousClock.now < deadline {
            do { try store.flush(); flushed = true } catch { usleep(20_000) }
        }
        #expect(flushed, "writes did not become durable after space returned")
        #expect(store.pollDurable().last == DurableMark(room: room, roomSeq: seq))
        #expect(try store.append(batch(room, originSeq: seq + 1, payload: payload(seq + 1, payloadBytes))) == .appended(roomSeq: seq + 1))
        try store.flush()
    }

    static func verify(store: RoomLogStore) throws {
        let records = try readAll(store, room)
        #expect(!records.isEmpty)
        #expect(records.map(\.roomSeq) == Array(1...UInt64(records.count)))
        for record in records { #expect(record.payload == payload(record.roomSeq, record.payload.count)) }
    }
}
