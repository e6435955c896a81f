import InkCodec
import Testing
@testable import InkProtocol

private let hash = BlobHash(Array(1...32))!

/// The blob messages (docs/protocol.md 6a): exact bytes, round trips, bounds as typed errors.
@Test func blobMessagesRoundTripWithTheirBounds() throws {
    let put = ClientMessage.blobPut(hash: hash, size: 10, offset: 4, data: [9, 8, 7])
    let bytes = SessionMessageCodec.encode(put)
    #expect(bytes == [1, 7, 38] + Array(1...32) + [10, 4, 3, 9, 8, 7])
    #expect(try SessionMessageCodec.decodeClient(bytes) == put)
    for m in [ClientMessage.blobRequest(hash: hash, firstChunk: 5), .blobAck(hash: hash, chunk: 300)] {
        #expect(try SessionMessageCodec.decodeClient(SessionMessageCodec.encode(m)) == m)
    }
    for m in [ServerMessage.blobChunk(hash: hash, size: 100_000, index: 6, count: 7, data: [1, 2]),
              .blobStored(hash: hash, width: 1600, height: 1200), .blobMissing(hash: hash)] {
        #expect(try SessionMessageCodec.decodeServer(SessionMessageCodec.encode(m)) == m)
    }
    // A part past the blob's size, an empty blob, a chunk index past the count, a short hash.
    #expect(throws: SessionMessageError.self) {
        try SessionMessageCodec.decodeClient(SessionMessageCodec.encode(ClientMessage.blobPut(hash: hash, size: 10, offset: 8, data: [1, 2, 3])))
    }
    #expect(throws: SessionMessageError.self) {
        try SessionMessageCodec.decodeClient(SessionMessageCodec.encode(ClientMessage.blobPut(hash: hash, size: 0, offset: 0, data: [])))
    }
    #expect(throws: SessionMessageError.self) {
        try SessionMessageCodec.decodeServer(SessionMessageCodec.encode(ServerMessage.blobChunk(hash: hash, size: 10, index: 2, count: 2, data: [])))
    }
    #expect(throws: SessionMessageError.truncated) { try SessionMessageCodec.decodeClient([1, 8, 3, 1, 2, 3]) }
    // Direction: a device's kind given to the device decoder and the reverse.
    #expect(throws: SessionMessageError.wrongDirection(kind: 7)) { try SessionMessageCodec.decodeServer(bytes) }
    #expect(throws: SessionMessageError.wrongDirection(kind: 44)) {
        try SessionMessageCodec.decodeClient(SessionMessageCodec.encode(ServerMessage.blobMissing(hash: hash)))
    }
}
