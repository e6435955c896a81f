// inkstore-torture: the child process of the kill -9 test (Tests/InkStoreTests/CrashTortureTests).
//
//     inkstore-torture <database> <seed> <always|batch|off>
//
// Prints "ready" once the store is open, then appends under load to three rooms (board retention, a snapshot every 250 batches) and writes
// one line "room roomSeq" to stdout whenever a room's durable high-water mark moves, one write(2)
// per report so a kill never leaves half a line. It runs until it is killed.
// Payloads check themselves: roomSeq, length, then bytes derived from both (see
// `torturePayload`, mirrored in the test).
import Foundation
import InkStore

func torturePayload(room: String, seq: UInt64, fillerBytes: Int) -> [UInt8] {
    var bytes = withUnsafeBytes(of: seq.littleEndian, Array.init) + withUnsafeBytes(of: UInt32(fillerBytes).littleEndian, Array.init)
    var state = seq &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(room.utf8.last ?? 0)
    for _ in 0..<fillerBytes {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        bytes.append(UInt8(truncatingIfNeeded: state >> 33))
    }
    return bytes
}

struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func report(_ marks: [DurableMark]) {
    guard !marks.isEmpty else { return }
    let text = marks.map { "\($0.room) \($0.roomSeq)\n" }.joined()
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("inkstore-torture: \(message)\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let seed = UInt64(arguments[2]), let durability = Durability(rawValue: arguments[3]) else {
    fail("usage: inkstore-torture <database> <seed> <always|batch|off>")
}
let rooms = ["t0", "t1", "t2"]
var options = SQLiteRoomLogStore.Options()
options.durability = durability
options.defaultRetention = .board
options.limits.maxPendingOps = 4096
let store: SQLiteRoomLogStore
do { store = try SQLiteRoomLogStore(path: arguments[1], options: options) } catch { fail("open: \(error)") }
var rng = SplitMix64(state: seed)
var ready = Array("ready\n".utf8)
_ = ready.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
while true {
    for _ in 0..<(1 + rng.next() % 40) {
        let room = rooms[Int(rng.next() % 3)]
        let seq = (store.room(room)?.lastRoomSeq ?? 0) + 1
        let payload = torturePayload(room: room, seq: seq, fillerBytes: Int(rng.next() % 3000))
        do {
            _ = try store.append(NewBatch(room: room, origin: 1, originSeq: seq, author: "torture", receivedAtMs: seq, payload: payload))
        } catch .backlogFull {
            do { try store.flush() } catch { fail("flush: \(error)") }
        } catch {
            fail("append: \(error)")
        }
        let previous = store.room(room)?.snapshotUptoRoomSeq ?? 0
        if seq % 250 == 0 && seq - 100 > previous {
            let snapshot = RoomSnapshot(uptoRoomSeq: seq - 100, payload: torturePayload(room: room, seq: seq - 100, fillerBytes: 64),
                                        digest: [UInt8](repeating: 0xD1, count: 32), createdAtMs: seq)
            do { try store.writeSnapshot(room: room, snapshot) } catch { fail("snapshot: \(error)") }
        }
    }
    report(store.pollDurable())
    if rng.next() % 8 == 0 { usleep(300) }
}
