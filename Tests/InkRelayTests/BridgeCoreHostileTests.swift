import InkCodec
import InkProtocol
import Testing
@testable import InkRelay

/// Well-formed but hostile messages on a room's topics (a broker client that is not a daemon):
/// what a home and a follower refuse, and that the refusals are counted as malformed.
struct BridgeCoreHostileTests {
    final class Log: BridgeLogReader {
        func records(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) -> [RelayRecord] { [] }
    }

    static let payload: [UInt8] = {
        var state = BinaryCodecState()
        let batch = Batch(author: AuthorID(7), commands: [
            TimedCommand(timeMs: 10, command: .point(StrokePoint(stroke: StrokeID(1), phase: .start, x: 1000, y: 2000))),
        ])
        return try! BinaryBatchCodec.encode(batch, state: &state, selfContained: true)
    }()

    static func record(_ seq: UInt64, payload: [UInt8] = BridgeCoreHostileTests.payload) -> RelayRecord {
        RelayRecord(room: "r", roomSeq: seq, author: AuthorID(7), user: "u", origin: 9, originSeq: seq, timeMs: seq, payload: payload)
    }

    static let start = Instant.milliseconds(1000)

    /// A core of room "r" following daemon "h" (replica head 2), outputs drained.
    static func follower() -> BridgeCore {
        let core = BridgeCore(configuration: BridgeConfiguration(daemonID: "f", incarnation: 1), log: Log())
        core.openRoom("r", head: 2, now: start)
        core.handleConnected(now: start)
        core.handleMessage(topic: "t", payload: BridgeWire.encode(.claim(room: "r", BridgeClaim(daemon: "h", head: 2))), now: start)
        #expect(core.home(of: "r") == "h")
        while core.pollOutput() != nil {}
        return core
    }

    /// A core leading room "r" (head 5), outputs drained.
    static func home() -> BridgeCore {
        let core = BridgeCore(configuration: BridgeConfiguration(daemonID: "h", incarnation: 1), log: Log())
        core.openRoom("r", head: 5, now: start)
        core.handleConnected(now: start)
        core.handleTimeout(now: start + .milliseconds(400))
        core.handleMessage(topic: "t", payload: BridgeWire.encode(.claim(room: "r", BridgeClaim(daemon: "h", head: 5))), now: start + .milliseconds(410))
        core.handleTimeout(now: start + .milliseconds(710))
        #expect(core.home(of: "r") == "h")
        while core.pollOutput() != nil {}
        return core
    }

    static func outputs(_ core: BridgeCore) -> [BridgeOutput] {
        var all: [BridgeOutput] = []
        while let o = core.pollOutput() { all.append(o) }
        return all
    }

    @Test func aRecordWhosePayloadIsNotABatchIsRefusedAndTheRealOneTakesItsNumber() {
        let core = Self.follower()
        let now = Self.start + .milliseconds(100)
        core.handleMessage(topic: "inkwire/room/r/log", payload: BridgeWire.encode(.record(Self.record(3, payload: [0xFF, 0]))), now: now)
        core.handleMessage(topic: "inkwire/room/r/response/f",
                           payload: BridgeWire.encode(.response(room: "r", records: [Self.record(4, payload: [1])])), now: now)
        #expect(Self.outputs(core) == [.event(.malformed(topic: "inkwire/room/r/log", .badValue("record payload"))),
                                       .event(.malformed(topic: "inkwire/room/r/response/f", .badValue("record payload")))])
        #expect(core.metrics.malformed == 2)
        core.handleMessage(topic: "inkwire/room/r/log", payload: BridgeWire.encode(.record(Self.record(3))), now: now)
        #expect(Self.outputs(core) == [.deliverOrdered(Self.record(3))])
    }

    @Test func onlyTheHomesOwnHeadMakesAFollowerAskForMore() {
        let core = Self.follower()
        let now = Self.start + .milliseconds(2000)
        core.handleMessage(topic: "inkwire/room/r/log", payload: BridgeWire.encode(.head(room: "r", daemon: "x", roomSeq: 1000)), now: now)
        #expect(Self.outputs(core) == [])
        core.handleMessage(topic: "inkwire/room/r/log", payload: BridgeWire.encode(.head(room: "r", daemon: "h", roomSeq: 4)), now: now)
        #expect(Self.outputs(core) == [.publish(topic: "inkwire/room/r/request",
                                                payload: BridgeWire.encode(.request(room: "r", requester: "f", from: 3, through: UInt64.max)),
                                                retain: false)])
    }

    @Test func aClaimFarAheadOfTheRoomMovesNeitherTheHomeNorAFollower() {
        let home = Self.home()
        let bogus = BridgeWire.encode(.claim(room: "r", BridgeClaim(daemon: "x", head: 5 + (1 << 20) + 1)))
        let now = Self.start + .milliseconds(2000)
        home.handleMessage(topic: "inkwire/room/r/home", payload: bogus, now: now)
        #expect(home.home(of: "r") == "h")
        // The home refuses it and puts its own claim back as the retained one.
        #expect(Self.outputs(home) == [.event(.malformed(topic: "inkwire/room/r/home", .badValue("claim head"))),
                                       .publish(topic: "inkwire/room/r/home",
                                                payload: BridgeWire.encode(.claim(room: "r", BridgeClaim(daemon: "h", head: 5))), retain: true)])
        let follower = Self.follower()
        follower.handleMessage(topic: "inkwire/room/r/home", payload: bogus, now: now)
        #expect(follower.home(of: "r") == "h")
        #expect(Self.outputs(follower) == [.event(.malformed(topic: "inkwire/room/r/home", .badValue("claim head")))])
        // Within the bound a better claim still moves the room (a split broker healing).
        home.handleMessage(topic: "inkwire/room/r/home", payload: BridgeWire.encode(.claim(room: "r", BridgeClaim(daemon: "x", head: 6))), now: now)
        #expect(home.home(of: "r") == "x")
        #expect(home.metrics.malformed == 1 && follower.metrics.malformed == 1)
    }

    /// Each forwarder restart (a new incarnation) used to leave its old stream in the home's
    /// forward buffer for good: after 4096 streams every new one was refused and its batches
    /// never reached the room. A new incarnation now replaces the old stream.
    @Test func forwarderRestartsDoNotFillTheHomesStreamTable() {
        let core = Self.home()
        let now = Self.start + .milliseconds(2000)
        var delivered = 0
        for incarnation in 1...5000 as ClosedRange<UInt64> {
            let batch = ForwardedBatch(room: "r", origin: 1, originSeq: incarnation, user: "u", payload: Self.payload)
            core.handleMessage(topic: "inkwire/room/r/forward/f",
                               payload: BridgeWire.encode(.forward(daemon: "f", incarnation: incarnation, forwardSeq: 1, floor: 1, batch)), now: now)
            for o in Self.outputs(core) { if case .deliverForwarded(let b) = o, b == batch { delivered += 1 } }
        }
        #expect(delivered == 5000)
    }
}
