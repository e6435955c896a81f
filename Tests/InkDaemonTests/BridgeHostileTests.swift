import Glibc
import InkCodec
import InkDaemon
import InkRelay
import InkUV
import Testing

/// A broker client that is not a daemon publishes hostile messages onto a bridged room's topics
/// while a member draws on the home A and another watches on the follower B (real `inkwired`s,
/// real `mosquitto`). The daemons count and drop what they must not act on; nothing reaches the
/// room but the drawn commands; both keep serving.
@Suite(.serialized) struct BridgeHostileTests {
    /// One hostile publish and whether each daemon counts it as malformed (A leads: it hears
    /// `home`, `log`, `forward/+`, `request`, `response/a`; B follows: `home`, `log`,
    /// `response/b`).
    struct Hostile {
        let topic: String
        let payload: [UInt8]
        var retain = false
        let countedAtA: Bool
        let countedAtB: Bool
    }

    static let room = "lesson"
    static let topics = BridgeTopics(prefix: "inkwire")

    /// A compact binary batch the relay accepts.
    static let validPayload: [UInt8] = {
        var state = BinaryCodecState()
        let batch = Batch(author: AuthorID(1), commands: [
            TimedCommand(timeMs: 0, command: .point(StrokePoint(stroke: StrokeID(1), phase: .start, x: 123_000, y: 456_000))),
        ])
        return try! BinaryBatchCodec.encode(batch, state: &state, selfContained: true)
    }()

    static func record(_ seq: UInt64, payload: [UInt8]) -> RelayRecord {
        RelayRecord(room: room, roomSeq: seq, author: AuthorID(1), user: "mallory", origin: 666, originSeq: seq, timeMs: 0, payload: payload)
    }

    /// Everything the hostile client publishes, in order, after it has replayed `captured`
    /// (real records of the room, byte for byte).
    static func barrage(captured: [[UInt8]]) -> [Hostile] {
        let home = topics.home(room), log = topics.log(room), request = topics.request(room)
        let forward = topics.forward(room, daemon: "mallory")
        let claim = BridgeWire.encode(.claim(room: room, BridgeClaim(daemon: "mallory", head: 5)))
        let forged = BridgeWire.encode(.forward(daemon: "mallory", incarnation: 1, forwardSeq: 1, floor: 1,
                                                ForwardedBatch(room: room, origin: 666, originSeq: 1, user: "mallory", payload: [0xDE, 0xAD])))
        var oversized = BridgeWire.encode(.record(record(1, payload: [])))
        oversized += [UInt8](repeating: 0, count: BridgeWire.maxMessageBytes + 1 - oversized.count)
        // The name length says 1000 bytes (names are at most 64).
        let longName: [UInt8] = [1, 3, UInt8(room.utf8.count)] + Array(room.utf8) + [1, 1, 0xE8, 0x07] + [UInt8](repeating: 0x41, count: 1000)
        var list: [Hostile] = [
            // Claims first: a bogus home claim with a huge head, retained, must move nothing.
            Hostile(topic: home, payload: Array(claim.dropLast(2)), countedAtA: true, countedAtB: true),
            Hostile(topic: home, payload: [2] + claim.dropFirst(), countedAtA: true, countedAtB: true),
            Hostile(topic: home, payload: BridgeWire.encode(.claim(room: room, BridgeClaim(daemon: "mallory", head: BridgeWire.maxSequence))),
                    retain: true, countedAtA: true, countedAtB: true),
            // Past the wire's bound: a decoding error.
            Hostile(topic: home, payload: claim.dropLast(1) + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
                    countedAtA: true, countedAtB: true),
            // The log: wrong version, random bytes, oversized, a long name, an empty message (ignored).
            Hostile(topic: log, payload: [9] + BridgeWire.encode(.record(record(3, payload: validPayload))).dropFirst(), countedAtA: true, countedAtB: true),
            Hostile(topic: log, payload: [0xFF, 0x13, 0x37, 0x00, 0x42], countedAtA: true, countedAtB: true),
            Hostile(topic: log, payload: oversized, countedAtA: true, countedAtB: true),
            Hostile(topic: log, payload: longName, countedAtA: true, countedAtB: true),
            Hostile(topic: log, payload: [], countedAtA: false, countedAtB: false),
            // A record whose payload is no batch, at a future number: B refuses it (A, the home, ignores records).
            Hostile(topic: log, payload: BridgeWire.encode(.record(record(30, payload: [0xDE, 0xAD]))), countedAtA: false, countedAtB: true),
            // Far ahead of any reorder window with a valid batch: dropped, B asks the home.
            Hostile(topic: log, payload: BridgeWire.encode(.record(record(1_000_000, payload: validPayload))), countedAtA: false, countedAtB: false),
            // Heads: one not from the home (ignored), one past the bound.
            Hostile(topic: log, payload: BridgeWire.encode(.head(room: room, daemon: "mallory", roomSeq: 1_000_000_000)), countedAtA: false, countedAtB: false),
            Hostile(topic: log, payload: [1, 4, UInt8(room.utf8.count)] + Array(room.utf8) + [1, 0x61] + [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0xC0, 0x01],
                    countedAtA: true, countedAtB: true),
            // Forwards reach the home only: truncated, floor above its number, a payload that is no batch.
            Hostile(topic: forward, payload: Array(forged.dropLast(3)), countedAtA: true, countedAtB: false),
            Hostile(topic: forward, payload: BridgeWire.encode(.forward(daemon: "mallory", incarnation: 1, forwardSeq: 1, floor: 2,
                                                                        ForwardedBatch(room: room, origin: 666, originSeq: 2, user: "m", payload: []))),
                    countedAtA: true, countedAtB: false),
            Hostile(topic: forward, payload: forged, countedAtA: false, countedAtB: false),
            // Requests: truncated, an empty range, and a valid one the home answers to nobody.
            Hostile(topic: request, payload: Array(BridgeWire.encode(.request(room: room, requester: "mallory", from: 1, through: 9)).dropLast(1)),
                    countedAtA: true, countedAtB: false),
            Hostile(topic: request, payload: BridgeWire.encode(.request(room: room, requester: "mallory", from: 9, through: 8)),
                    countedAtA: true, countedAtB: false),
            Hostile(topic: request, payload: BridgeWire.encode(.request(room: room, requester: "mallory", from: 1, through: UInt64.max)),
                    countedAtA: false, countedAtB: false),
            // Responses: too many records, a record that is no batch, random bytes.
            Hostile(topic: topics.response(room, daemon: "b"), payload: [1, 6, UInt8(room.utf8.count)] + Array(room.utf8) + [0x89, 0x40],
                    countedAtA: false, countedAtB: true),
            Hostile(topic: topics.response(room, daemon: "b"), payload: BridgeWire.encode(.response(room: room, records: [record(31, payload: [7])])),
                    countedAtA: false, countedAtB: true),
            Hostile(topic: topics.response(room, daemon: "a"), payload: [0x01, 0x06], countedAtA: true, countedAtB: false),
        ]
        // Real records replayed: copies of what both already have (or will have) dropped.
        list += captured.map { Hostile(topic: log, payload: $0, countedAtA: false, countedAtB: false) }
        return list
    }

    @Test func hostileMessagesOnARoomsTopicsAreCountedAndDroppedAndTheRoomCarriesOn() throws {
        guard MQTTBroker.isInstalled else { return }
        let broker = try MQTTBroker()
        let a = try BridgeDaemonTests.start("a", broker: broker, tag: "bridge-xa")
        let native = BridgeDaemonTests.trace(strokes: 30, tag: 8, in: a.directory)
        let watcherA = try BridgeDaemonTests.watch(a, user: "wa", count: native.lines.count, idle: "20")
        #expect(BridgeDaemonTests.homeDecided(a, selfHome: true), "\(a.process.log)")
        let b = try BridgeDaemonTests.start("b", broker: broker, tag: "bridge-xb")
        let watcherB = try BridgeDaemonTests.watch(b, user: "wb", count: native.lines.count, idle: "20")
        #expect(BridgeDaemonTests.homeDecided(b, selfHome: false), "\(b.process.log)")

        // The hostile client listens to the room's log to replay real records later.
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: Int32(broker.port), clientID: "mallory")
        configuration.maximumPayloadBytes = 2 * BridgeWire.maxMessageBytes
        let hostile = try MQTTClient(loop: loop, configuration: configuration)
        defer { hostile.close() }
        var captured: [[UInt8]] = []
        var heard = 0
        hostile.onMessage = { message in
            heard += 1
            if case .record? = try? BridgeWire.decode(message.payload), captured.count < 3 { captured.append(message.payload) }
        }
        try hostile.subscribe(topic: Self.topics.log(Self.room))
        hostile.start()
        // Subscribed once the home's periodic head (every 1 s) comes through.
        #expect(drive(loop, limitMicroseconds: 5_000_000) { heard > 0 })

        // About 2.4 s of drawing on A; the barrage goes out once three records were heard.
        let sender = try BridgeDaemonTests.send(a, user: "ada", trace: native.path, speed: "1")
        #expect(drive(loop, limitMicroseconds: 5_000_000) { captured.count == 3 })
        let barrage = Self.barrage(captured: captured)
        for h in barrage { _ = try hostile.publish(topic: h.topic, payload: h.payload, retain: h.retain) }
        let expectedA = Double(barrage.filter(\.countedAtA).count), expectedB = Double(barrage.filter(\.countedAtB).count)
        func malformed(_ d: BridgeDaemonTests.Bridged) -> Double? {
            (try? fetchMetrics(port: d.metricsPort)).flatMap { metricValue($0, "inkwire_bridge_malformed_total") }
        }
        #expect(drive(loop, limitMicroseconds: 5_000_000) { malformed(a) == expectedA && malformed(b) == expectedB },
                "malformed a \(String(describing: malformed(a))) of \(expectedA), b \(String(describing: malformed(b))) of \(expectedB)")

        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(watcherA.wait() == 0, "\(watcherA.errors)")
        #expect(watcherB.wait() == 0, "\(watcherB.errors)")
        #expect(watcherA.outputLines == native.lines)
        #expect(watcherB.outputLines == native.lines)

        // Both keep serving: later members get the whole board, on both daemons.
        let lateA = try BridgeDaemonTests.watch(a, user: "late-a", count: native.lines.count)
        let lateB = try BridgeDaemonTests.watch(b, user: "late-b", count: native.lines.count)
        #expect(lateA.wait() == 0, "\(lateA.errors)")
        #expect(lateB.wait() == 0, "\(lateB.errors)")
        #expect(lateA.outputLines == native.lines)
        #expect(lateB.outputLines == native.lines)

        // Nothing moved the room, nothing was refused by a relay, and the counts are exact.
        let scrapeA = try fetchMetrics(port: a.metricsPort), scrapeB = try fetchMetrics(port: b.metricsPort)
        #expect(metricValue(scrapeA, "inkwire_bridge_rooms_led") == 1 && metricValue(scrapeB, "inkwire_bridge_rooms_led") == 0)
        #expect(metricValue(scrapeA, "inkwire_bridge_malformed_total") == expectedA)
        #expect(metricValue(scrapeB, "inkwire_bridge_malformed_total") == expectedB)
        #expect(metricValue(scrapeB, "inkwire_bridge_records_refused_total") == 0)
        #expect(!a.process.log.contains("home conflict") && !b.process.log.contains("home=mallory"))
    }

    /// The protocol cannot refuse a forged record or a plausible claim (docs/scale-out.md, What
    /// the bridge trusts): the broker's ACLs must keep the prefix to the daemons. Here the
    /// daemons log in as `inkwired`, the only user the ACL lets under `inkwire/`; `alice`, a
    /// valid user of the same broker, publishes exactly those forgeries and nothing reaches the
    /// daemons; a client without a password is refused.
    @Test func withDaemonCredentialsTheACLKeepsForgeriesOffThePrefix() throws {
        let passwd = "/usr/bin/mosquitto_passwd"
        guard MQTTBroker.isInstalled, access(passwd, X_OK) == 0 else { return }
        let secrets = DaemonProcess.scratchDirectory("bridge-acl")
        defer { _ = system("rm -rf '\(secrets)'") }
        // mosquitto started as root reads these as the user `mosquitto`.
        _ = chmod(secrets, 0o755)
        #expect(system("\(passwd) -b -c '\(secrets)/passwd' inkwired daemon-secret && \(passwd) -b '\(secrets)/passwd' alice alice-secret") == 0)
        writeFile(secrets + "/acl", Array("user inkwired\ntopic readwrite inkwire/#\nuser alice\ntopic readwrite im/#\n".utf8))
        writeFile(secrets + "/bridge-password", Array("daemon-secret\n".utf8))
        for file in ["passwd", "acl"] { _ = chmod(secrets + "/" + file, 0o644) }
        let broker = try MQTTBroker(access: "allow_anonymous false\npassword_file \(secrets)/passwd\nacl_file \(secrets)/acl\nlog_type all\n")
        let login = ["--bridge-password-file", secrets + "/bridge-password"]
        let a = try BridgeDaemonTests.start("a", broker: broker, tag: "bridge-acl-a", user: "inkwired", extra: login)
        let native = BridgeDaemonTests.trace(strokes: 20, tag: 9, in: a.directory)
        let watcherA = try BridgeDaemonTests.watch(a, user: "wa", count: native.lines.count, idle: "20")
        #expect(BridgeDaemonTests.homeDecided(a, selfHome: true), "\(a.process.log)")
        let b = try BridgeDaemonTests.start("b", broker: broker, tag: "bridge-acl-b", user: "inkwired", extra: login)
        let watcherB = try BridgeDaemonTests.watch(b, user: "wb", count: native.lines.count, idle: "20")
        #expect(BridgeDaemonTests.homeDecided(b, selfHome: false), "\(b.process.log)")

        let loop = try EventLoop()
        defer { loop.shutdown() }
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: Int32(broker.port), clientID: "alice")
        configuration.username = "alice"
        configuration.password = "alice-secret"
        let alice = try MQTTClient(loop: loop, configuration: configuration)
        defer { alice.close() }
        var anonymous = MQTTClient.Configuration(host: "127.0.0.1", port: Int32(broker.port), clientID: "anonymous")
        anonymous.reconnectMinimumMicroseconds = 1_000_000
        let stranger = try MQTTClient(loop: loop, configuration: anonymous)
        defer { stranger.close() }
        alice.start()
        stranger.start()
        #expect(drive(loop, limitMicroseconds: 5_000_000) { alice.state == .connected })

        let sender = try BridgeDaemonTests.send(a, user: "ada", trace: native.path, speed: "1")
        // What the daemons would act on: a claim just ahead of the room, records at the next numbers.
        var forgeries = [(Self.topics.home(Self.room), BridgeWire.encode(.claim(room: Self.room, BridgeClaim(daemon: "mallory", head: 3))), true)]
        for seq in 1...40 as ClosedRange<UInt64> {
            forgeries.append((Self.topics.log(Self.room), BridgeWire.encode(.record(Self.record(seq, payload: Self.validPayload))), false))
        }
        for (topic, payload, retain) in forgeries { _ = try alice.publish(topic: topic, payload: payload, retain: retain) }
        // A second on the loop: alice's publishes go out, the stranger tries to connect.
        _ = drive(loop, limitMicroseconds: 1_000_000) { false }
        #expect(stranger.state != .connected && stranger.connectCount == 0)
        #expect(alice.connectCount == 1 && alice.state == .connected)

        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(watcherA.wait() == 0, "\(watcherA.errors)")
        #expect(watcherB.wait() == 0, "\(watcherB.errors)")
        #expect(watcherA.outputLines == native.lines)
        #expect(watcherB.outputLines == native.lines)
        let scrapeA = try fetchMetrics(port: a.metricsPort), scrapeB = try fetchMetrics(port: b.metricsPort)
        #expect(metricValue(scrapeA, "inkwire_bridge_rooms_led") == 1 && metricValue(scrapeB, "inkwire_bridge_rooms_led") == 0)
        #expect(metricValue(scrapeA, "inkwire_bridge_malformed_total") == 0 && metricValue(scrapeB, "inkwire_bridge_malformed_total") == 0)
        #expect(!b.process.log.contains("home=mallory"))
        #expect(broker.log.contains("Denied PUBLISH from alice"), "\(broker.log)")
    }
}
