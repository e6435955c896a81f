// fuzz-modules: InkRelay
// Bridge messages (docs/protocol.md 9.2): decoding never traps; a decoded message re-encodes to
// exactly its input (minimal varints, no trailing bytes: the encoding is canonical) and decodes
// again to itself. Then the messages are played into a home and a follower `BridgeCore` of
// room "r" as a hostile broker client would: neither traps, every publish either makes decodes,
// and its queues stay within their bounds.
//
// Input: mode:u8, then with mode bit 0 clear one message (the rest), else a list of
// `length:u8 message` chunks. Mode bit 1 swaps every payload for a valid batch, so records and
// forwards reach the reorder buffers and the relay's checks.

/// A home's durable log: records 1...5 of room "r".
private final class FuzzLog: BridgeLogReader {
    let records: [RelayRecord]
    init(payload: [UInt8]) {
        records = (1...5).map { RelayRecord(room: "r", roomSeq: $0, author: AuthorID(7), user: "u", origin: 9, originSeq: $0, timeMs: $0, payload: payload) }
    }
    func records(room: String, after: UInt64, maxRecords: Int, maxBytes: Int) -> [RelayRecord] {
        guard room == "r" else { return [] }
        return Array(records.filter { $0.roomSeq > after }.prefix(maxRecords))
    }
}

private let validPayload: [UInt8] = {
    var state = BinaryCodecState()
    let batch = Batch(author: AuthorID(7), commands: [
        TimedCommand(timeMs: 10, command: .point(StrokePoint(stroke: StrokeID(1), phase: .start, x: 1000, y: 2000))),
    ])
    return try! BinaryBatchCodec.encode(batch, state: &state, selfContained: true)
}()

private func withValidPayloads(_ message: BridgeMessage) -> BridgeMessage {
    func fix(_ r: RelayRecord) -> RelayRecord { var r = r; r.payload = validPayload; return r }
    switch message {
    case .record(let r): return .record(fix(r))
    case .response(let room, let records): return .response(room: room, records: records.map(fix))
    case .forward(let d, let i, let s, let f, var b):
        b.payload = validPayload
        return .forward(daemon: d, incarnation: i, forwardSeq: s, floor: f, b)
    default: return message
    }
}

private func drain(_ core: BridgeCore) {
    var n = 0
    while let output = core.pollOutput() {
        n += 1
        if n > 100_000 { fatalError("pollOutput does not stop") }
        if case .publish(_, let payload, _) = output {
            guard (try? BridgeWire.decode(payload)) != nil else { fatalError("the core published a message it cannot decode") }
        }
    }
    let m = core.metrics
    guard m.reorderHeld <= 16_384 + 4096, core.pendingForwards("r") <= core.configuration.maxPendingForwardsPerRoom else {
        fatalError("bound exceeded: \(m)")
    }
    _ = core.pollTimeout()
}

/// A core that leads room "r" (head 5), or follows daemon "h" in it (head 2).
private func makeCore(home: Bool) -> BridgeCore {
    let core = BridgeCore(configuration: BridgeConfiguration(daemonID: home ? "h" : "f", incarnation: 1), log: FuzzLog(payload: validPayload))
    let start = Instant.milliseconds(1000)
    core.openRoom("r", head: home ? 5 : 2, now: start)
    core.handleConnected(now: start)
    let homeClaim = BridgeWire.encode(.claim(room: "r", BridgeClaim(daemon: "h", head: 5)))
    if home {
        core.handleTimeout(now: start + .milliseconds(500))
        core.handleMessage(topic: core.topics.home("r"), payload: homeClaim, now: start + .milliseconds(510))
        core.handleTimeout(now: start + .milliseconds(900))
        guard core.home(of: "r") == "h" else { fatalError("setup: not home") }
    } else {
        core.handleMessage(topic: core.topics.home("r"), payload: homeClaim, now: start + .milliseconds(10))
        guard core.home(of: "r") == "h" else { fatalError("setup: not following") }
    }
    drain(core)
    return core
}

@_cdecl("LLVMFuzzerTestOneInput")
public func bridgeWireFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    var chunks: [[UInt8]] = []
    if mode & 1 == 0 {
        chunks = [Array(bytes.dropFirst())]
    } else {
        var i = 1
        while i < bytes.count {
            let n = Int(bytes[i])
            let end = min(bytes.count, i + 1 + n)
            chunks.append(Array(bytes[(i + 1)..<end]))
            i = end
        }
    }
    var played: [[UInt8]] = []
    for chunk in chunks {
        guard let message = try? BridgeWire.decode(chunk) else {
            played.append(chunk)
            continue
        }
        let again = BridgeWire.encode(message)
        guard again == chunk else { fatalError("decoded message does not re-encode to its input") }
        guard (try? BridgeWire.decode(again)) == message else { fatalError("re-encoded message decodes differently") }
        played.append(mode & 2 == 0 ? chunk : BridgeWire.encode(withValidPayloads(message)))
    }
    let topics = ["home", "log", "request", "forward/x", "response/f", "response/h"]
    for home in [true, false] {
        let core = makeCore(home: home)
        var now = Instant.milliseconds(2000)
        for (n, payload) in played.enumerated() {
            core.handleMessage(topic: "inkwire/room/r/" + topics[n % topics.count], payload: payload, now: now)
            drain(core)
            now = now + .milliseconds(50)
            if n % 3 == 2 {
                core.handleTimeout(now: now)
                drain(core)
            }
        }
        core.handleTimeout(now: now + .milliseconds(5000))
        drain(core)
    }
    return 0
}
