import Foundation
import InkCodec
import Testing
@testable import InkProtocol

private func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
}

private func unhex(_ s: String) -> [UInt8]? {
    let chars = Array(s.utf8)
    guard chars.count % 2 == 0 else { return nil }
    func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 97...102: c - 87
        default: nil
        }
    }
    var out: [UInt8] = []
    for i in stride(from: 0, to: chars.count, by: 2) {
        guard let h = nibble(chars[i]), let l = nibble(chars[i + 1]) else { return nil }
        out.append(h << 4 | l)
    }
    return out
}

private enum Either: Sendable {
    case client(ClientMessage)
    case server(ServerMessage)
}

/// The messages of Vectors/session-messages.txt, by name.
private let vectorMessages: [(String, Either)] = [
    ("join-nothing", .client(.join(JoinRequest(room: "math", user: "ana", role: .teacher, origin: 7)))),
    ("join-upto", .client(.join(JoinRequest(room: "r", user: "bo", role: .viewer, token: [0xAA, 0xBB], origin: 300,
                                            have: .upTo(roomSeq: 1000, digest: 0x0102_0304_0506_0708))))),
    ("join-partial", .client(.join(JoinRequest(room: "r", user: "bo", role: .presenter, origin: 1,
                                               have: .partialSnapshot(snapshotRoomSeq: 5, lastChunk: 2))))),
    ("batch", .client(.batch(originSeq: 1, payload: [1, 2, 3]))),
    ("grant", .client(.grantDraw(user: "bo"))),
    ("revoke", .client(.revokeDraw(user: "bo"))),
    ("sync-ack", .client(.syncAck(syncID: 1, chunk: 129))),
    ("leave", .client(.leave)),
    ("join-accepted", .server(.joinAccepted(member: AuthorID(2), role: .presenter, roomHead: 42, syncFollows: true))),
    ("join-refused", .server(.joinRefused(.roomFull, text: "full"))),
    ("room-batch", .server(.roomBatch(RoomBatch(roomSeq: 3, author: AuthorID(1), timeMs: 1_700_000_000_000, payload: [9])))),
    ("batch-ack", .server(.batchAck(originSeq: 4, roomSeq: 200))),
    ("error", .server(.error(.permissionDenied, originSeq: 4, text: "no"))),
    ("member", .server(.member(id: AuthorID(3), user: "cy", role: .viewer, present: false))),
    ("sync-begin", .server(.syncBegin(SyncBegin(syncID: 1, mode: .snapshot, afterRoomSeq: 10, throughRoomSeq: 12, firstChunk: 0)))),
    ("sync-chunk", .server(.syncChunk(syncID: 1, index: 0, items: [
        SyncItem(roomSeq: 0, author: AuthorID(1), timeMs: 0, payload: [5, 6]),
        SyncItem(roomSeq: 11, author: AuthorID(2), timeMs: 1, payload: []),
    ]))),
    ("sync-done", .server(.syncDone(syncID: 1, roomSeq: 12, digest: 0xe259_5c44_9236_5745))),
    ("going-away", .server(.goingAway(.shuttingDown, text: "bye"))),
    ("ping", .client(.ping)),
    ("join-refused-quota", .server(.joinRefused(.quotaExceeded, text: "quota"))),
    ("going-away-evicted", .server(.goingAway(.evicted, text: "idle"))),
    ("blob-put", .client(.blobPut(hash: vectorHash, size: 5, offset: 2, data: [10, 11, 12]))),
    ("blob-request", .client(.blobRequest(hash: vectorHash, firstChunk: 3))),
    ("blob-ack", .client(.blobAck(hash: vectorHash, chunk: 130))),
    ("blob-chunk", .server(.blobChunk(hash: vectorHash, size: 40000, index: 1, count: 3, data: [0xFF, 0]))),
    ("blob-stored", .server(.blobStored(hash: vectorHash, width: 1600, height: 1200))),
    ("blob-missing", .server(.blobMissing(hash: vectorHash))),
    ("error-unknown-blob", .server(.error(.unknownBlob, originSeq: 2, text: "upload it"))),
]

/// The blob vectors' hash: bytes 0 to 31.
private let vectorHash = BlobHash((0..<32).map { UInt8($0) })!

private func encoded(_ m: Either) -> [UInt8] {
    switch m {
    case .client(let c): SessionMessageCodec.encode(c)
    case .server(let s): SessionMessageCodec.encode(s)
    }
}

private func vectorsFile() -> String? {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // Tests/InkProtocolTests/<file>
    let path = parts.joined(separator: "/") + "/Vectors/session-messages.txt"
    return readText(path)
}

private func readText(_ path: String) -> String? {
    try? String(contentsOfFile: path, encoding: .utf8)
}

@Test func vectorsMatchTheEncoderAndDecodeBack() throws {
    let text = try #require(vectorsFile(), "Vectors/session-messages.txt is missing")
    var table: [String: String] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.isEmpty {
        // NAME HEX JSON (the JSON is for other implementations: web/test/messages.test.mjs).
        let fields = line.split(separator: " ", maxSplits: 2)
        guard fields.count >= 2 else { continue }
        table[String(fields[0])] = String(fields[1])
    }
    for (name, message) in vectorMessages {
        let bytes = encoded(message)
        #expect(table[name] == hex(bytes), "\(name) encodes as \(hex(bytes))")
        guard let fromFile = table[name].flatMap(unhex) else {
            Issue.record("\(name) has no valid vector")
            continue
        }
        switch message {
        case .client(let c): #expect(try SessionMessageCodec.decodeClient(fromFile) == c, "\(name)")
        case .server(let s): #expect(try SessionMessageCodec.decodeServer(fromFile) == s, "\(name)")
        }
    }
    #expect(table.count == vectorMessages.count)
}

@Test func unknownKindsAreSkippedAndExtraBodyBytesIgnored() throws {
    // kind 20 (client range, unknown) with a 2-byte body.
    #expect(try SessionMessageCodec.decodeClient([1, 20, 2, 0xFF, 0xFF]) == .unknown(kind: 20))
    #expect(try SessionMessageCodec.decodeServer([1, 99, 0]) == .unknown(kind: 99))
    // A later version appended a field to syncAck: the known fields still decode.
    #expect(try SessionMessageCodec.decodeClient([1, 5, 3, 1, 2, 0x7F]) == .syncAck(syncID: 1, chunk: 2))
}

@Test func malformedMessagesGiveTypedErrors() {
    func client(_ b: [UInt8]) -> SessionMessageError? {
        do { _ = try SessionMessageCodec.decodeClient(b); return nil } catch { return error }
    }
    #expect(client([]) == .truncated)
    #expect(client([2, 6, 0]) == .unsupportedVersion(2))
    #expect(client([1, 6, 1]) == .truncated)
    #expect(client([1, 6, 0, 0]) == .trailingBytes)
    #expect(client([1, 0x86, 0x00, 0]) == .nonMinimalVarint)
    #expect(client([1, 5, 1, 0x80]) == .truncated)
    #expect(client([1, 34, 0]) == .wrongDirection(kind: 34))
    // join with role 9
    #expect(client([1, 1, 6, 1, 0x61, 1, 0x62, 9, 0]) == .invalidValue("role"))
    // join with a room name of 65 bytes
    #expect(client([1, 1, 1, 65]) == .tooLarge("room"))
    // grant with invalid UTF-8
    #expect(client([1, 3, 2, 1, 0xFF]) == .invalidUTF8("user"))
    // batch payload over the bound
    var big = MessageWriter()
    big.varint(1)
    big.varint(UInt64(SessionMessageCodec.maxBatchPayloadBytes + 1))
    var msg = MessageWriter()
    msg.u8(1); msg.varint(2); msg.varint(UInt64(big.bytes.count)); msg.bytes += big.bytes
    #expect(client(msg.bytes) == .tooLarge("payload"))
    #expect(client([UInt8](repeating: 1, count: SessionMessageCodec.maxMessageBytes + 1)) == .tooLarge("message"))
}

@Test func everyTruncationOfEveryVectorFailsCleanly() {
    for (name, message) in vectorMessages {
        let bytes = encoded(message)
        for cut in 0..<bytes.count {
            let prefix = Array(bytes[0..<cut])
            switch message {
            case .client: #expect(throws: SessionMessageError.self, "\(name) cut \(cut)") { try SessionMessageCodec.decodeClient(prefix) }
            case .server: #expect(throws: SessionMessageError.self, "\(name) cut \(cut)") { try SessionMessageCodec.decodeServer(prefix) }
            }
        }
    }
}

@Test func longTextsAreCutToTheirBound() throws {
    let long = String(repeating: "é", count: SessionMessageCodec.maxTextBytes)
    let bytes = SessionMessageCodec.encode(ServerMessage.error(.other, originSeq: 0, text: long))
    guard case .error(_, _, let text) = try SessionMessageCodec.decodeServer(bytes) else {
        Issue.record("not an error")
        return
    }
    #expect(text.utf8.count == SessionMessageCodec.maxTextBytes)
}

@Test func aRoomBatchWithALongPayloadHasATwoByteBodyLengthAndDecodesBack() throws {
    let payload = (0..<300).map { UInt8(truncatingIfNeeded: $0 * 7) }
    let message = ServerMessage.roomBatch(RoomBatch(roomSeq: 200, author: AuthorID(3), timeMs: 5, payload: payload))
    let bytes = SessionMessageCodec.encode(message)
    // version 1, kind 34, body 2 + 1 + 1 + 2 + 300 = 306 (varint b2 02), roomSeq 200 (c8 01), author 3, time 5, length 300 (ac 02)
    #expect(Array(bytes.prefix(11)) == [1, 34, 0xb2, 0x02, 0xc8, 0x01, 3, 5, 0xac, 0x02, payload[0]])
    #expect(bytes.count == 4 + 306)
    #expect(try SessionMessageCodec.decodeServer(bytes) == message)
}
