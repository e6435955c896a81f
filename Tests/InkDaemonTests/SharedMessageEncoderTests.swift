import InkCodec
import InkProtocol
import Testing
@testable import InkDaemon

@Test func aRoomBatchFannedOutIsEncodedOnceIntoOneSharedArray() {
    let payload: [UInt8] = [9, 8, 7, 6, 5]
    let batch = ServerMessage.roomBatch(RoomBatch(roomSeq: 12, author: AuthorID(3), timeMs: 4_000, payload: payload))
    var encoder = SharedMessageEncoder()
    let first = encoder.encode(batch)
    #expect(first == SessionMessageCodec.encode(batch))
    // Another member's ack in between keeps the room batch's encoding.
    let ack = ServerMessage.batchAck(originSeq: 1, roomSeq: 12)
    #expect(encoder.encode(ack) == SessionMessageCodec.encode(ack))
    let second = encoder.encode(batch)
    #expect(second == first)
    #expect(first.withUnsafeBufferPointer { $0.baseAddress } == second.withUnsafeBufferPointer { $0.baseAddress })
    // A member in another codec state gets other payload bytes: its own encoding.
    let other = ServerMessage.roomBatch(RoomBatch(roomSeq: 12, author: AuthorID(3), timeMs: 4_000, payload: [9, 8, 7, 6, 4]))
    #expect(encoder.encode(other) == SessionMessageCodec.encode(other))
    let next = ServerMessage.roomBatch(RoomBatch(roomSeq: 13, author: AuthorID(3), timeMs: 4_000, payload: payload))
    #expect(encoder.encode(next) == SessionMessageCodec.encode(next))
}
