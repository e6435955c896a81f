import InkCodec
import Testing
@testable import InkRelay

struct BridgeWireTests {
    static let record = RelayRecord(room: "maths/1", roomSeq: 7, author: AuthorID(0xDEAD_BEEF), user: "ana", origin: 42,
                                    originSeq: 3, timeMs: 1_700_000_000_000, payload: [1, 2, 3])

    @Test(arguments: [
        BridgeMessage.claim(room: "maths/1", BridgeClaim(daemon: "d1", head: 9)),
        .forward(daemon: "d2", incarnation: 77, forwardSeq: 5, floor: 4,
                 ForwardedBatch(room: "maths/1", origin: 42, originSeq: 3, user: "ana", payload: [9, 9])),
        .record(record),
        .head(room: "maths/1", daemon: "d1", roomSeq: 300),
        .request(room: "maths/1", requester: "d2", from: 1, through: UInt64.max),
        .response(room: "maths/1", records: [record, record]),
    ])
    func roundTrips(_ message: BridgeMessage) throws {
        let bytes = BridgeWire.encode(message)
        #expect(try BridgeWire.decode(bytes) == message)
        // Every strict prefix is a typed error, never a trap.
        for n in 0..<bytes.count { #expect(throws: BridgeWireError.self) { try BridgeWire.decode(Array(bytes[0..<n])) } }
        #expect(throws: BridgeWireError.trailingBytes) { try BridgeWire.decode(bytes + [0]) }
    }

    @Test func exactBytesOfAClaim() {
        #expect(BridgeWire.encode(.claim(room: "r", BridgeClaim(daemon: "a", head: 300)))
                == [1, 1, 1, UInt8(ascii: "r"), 1, UInt8(ascii: "a"), 0xAC, 0x02])
    }

    @Test func refusesBadInput() {
        #expect(throws: BridgeWireError.unsupportedVersion(2)) { try BridgeWire.decode([2, 1]) }
        #expect(throws: BridgeWireError.unknownKind(99)) { try BridgeWire.decode([1, 99, 0]) }
        #expect(throws: BridgeWireError.badValue("request range")) {
            try BridgeWire.decode(BridgeWire.encode(.request(room: "r", requester: "a", from: 5, through: 4)))
        }
        let longName = String(repeating: "x", count: BridgeWire.maxNameBytes + 1)
        #expect(throws: BridgeWireError.self) { try BridgeWire.decode(BridgeWire.encode(.head(room: longName, daemon: "a", roomSeq: 1))) }
    }

    /// Fuzz/targets/BridgeWire.swift found this: a forward numbered UInt64.max (floor too) made
    /// a home's reorder buffer count one past it and trap. Numbers past `maxSequence` are now
    /// malformed.
    @Test func refusesNumbersPastTheBound() throws {
        let crash: [UInt8] = [1, 2, 1, 0x72, 1, 0x78, 3] + [UInt8](repeating: 0xFF, count: 9) + [1] + [UInt8](repeating: 0xFF, count: 9)
            + [1, 0x2A, 1, 3, 0x61, 0x6E, 0x61, 2, 1, 2]
        #expect(throws: BridgeWireError.badValue("sequence number")) { try BridgeWire.decode(crash) }
        let past = BridgeWire.maxSequence + 1
        let batch = ForwardedBatch(room: "r", origin: 1, originSeq: 1, user: "u", payload: [])
        for message in [BridgeMessage.claim(room: "r", BridgeClaim(daemon: "a", head: past)),
                        .forward(daemon: "a", incarnation: 1, forwardSeq: past, floor: 1, batch),
                        .record(RelayRecord(room: "r", roomSeq: past, author: AuthorID(1), user: "u", origin: 1, originSeq: 1, timeMs: 0, payload: [])),
                        .head(room: "r", daemon: "a", roomSeq: past)] {
            #expect(throws: BridgeWireError.badValue("sequence number")) { try BridgeWire.decode(BridgeWire.encode(message)) }
        }
        let atBound = BridgeMessage.forward(daemon: "a", incarnation: 1, forwardSeq: BridgeWire.maxSequence, floor: BridgeWire.maxSequence, batch)
        #expect(try BridgeWire.decode(BridgeWire.encode(atBound)) == atBound)
    }

    @Test func topicsEscapeRoomNames() {
        let t = BridgeTopics(prefix: "inkwire")
        #expect(t.forward("maths/1 b+#", daemon: "d1") == "inkwire/room/maths%2F1%20b%2B%23/forward/d1")
        #expect(t.home("r") == "inkwire/room/r/home")
        #expect(t.forwards("r") == "inkwire/room/r/forward/+")
        #expect(t.response("r", daemon: "d2") == "inkwire/room/r/response/d2")
    }

    @Test func claimsOrderByHeadThenDaemon() {
        #expect(BridgeClaim(daemon: "z", head: 5).beats(BridgeClaim(daemon: "a", head: 4)))
        #expect(BridgeClaim(daemon: "a", head: 5).beats(BridgeClaim(daemon: "b", head: 5)))
        #expect(!BridgeClaim(daemon: "b", head: 5).beats(BridgeClaim(daemon: "a", head: 5)))
    }

    @Test func authorIDsDeriveFromNames() {
        let a = BridgeAuthorID.forUser("ana")
        #expect(a == BridgeAuthorID.forUser("ana") && a.rawValue != 0)
        #expect(BridgeAuthorID.forUser("ana", avoiding: [a]) == AuthorID(a.rawValue &+ 1 == 0 ? 1 : a.rawValue &+ 1))
    }
}
