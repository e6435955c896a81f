import MQTTChaos
import Testing

/// Drains the session: bytes written to each side, and the ends, in order.
private struct Wire {
    var toBroker: [[UInt8]] = []
    var toClient: [[UInt8]] = []
    var ends: [MQTTChaosSession.Side] = []

    mutating func drain(_ session: inout MQTTChaosSession) {
        while let transmit = session.pollTransmit() {
            switch transmit {
            case .bytes(let bytes, .broker): toBroker.append(bytes)
            case .bytes(let bytes, .client): toClient.append(bytes)
            case .end(let side): ends.append(side)
            }
        }
    }
}

private func publish(_ index: Int, qos: UInt8 = 0) throws -> [UInt8] {
    try MQTTPacketBuilder.publish(topic: "room/1", payload: [UInt8(index >> 8), UInt8(index & 0xFF)], qos: qos,
                                  packetIdentifier: UInt16(index + 1))
}

@Test func quietSessionPassesEveryByteInOrder() throws {
    var session = MQTTChaosSession(configuration: MQTTChaosConfiguration(), runSeed: 1)
    var wire = Wire()
    let fromClient = [try MQTTPacketBuilder.connect(clientIdentifier: "q"), try publish(0, qos: 1), try publish(1), MQTTPacketBuilder.pingreq]
    let fromBroker = [[0x20, 2, 0, 0] as [UInt8], MQTTPacketBuilder.puback(packetIdentifier: 1), try publish(5, qos: 1)]
    session.handleBytes(fromClient.flatMap { $0 }, from: .client, now: 0)
    session.handleBytes(fromBroker.flatMap { $0 }, from: .broker, now: 0)
    wire.drain(&session)
    #expect(wire.toBroker == fromClient)
    #expect(wire.toClient == fromBroker)
    #expect(session.nextDeadline == nil)
    #expect(session.counters(from: .client).publishes == 2 && session.counters(from: .client).packets == 4)
}

@Test(arguments: [UInt64(1), 2, 3])
func publishesLeaveAtArrivalPlusTheirSeededDelay(seed: UInt64) throws {
    let configuration = MQTTChaosConfiguration(delayMicroseconds: 500, jitterMicroseconds: 30_000, duplicateChance: 0.1)
    var session = MQTTChaosSession(configuration: configuration, runSeed: seed)
    var wire = Wire()
    session.handleBytes(try MQTTPacketBuilder.connect(clientIdentifier: "drawer"), from: .client, now: 0)
    let count = 300
    // One publish per millisecond of virtual time; the clock then runs on until all are out.
    var now: UInt64 = 0
    for index in 0..<count {
        session.handleTimeout(now: now)
        session.handleBytes(try publish(index), from: .client, now: now)
        wire.drain(&session)
        now += 1000
    }
    while let deadline = session.nextDeadline {
        session.handleTimeout(now: deadline)
        wire.drain(&session)
    }

    // The model's own decisions, replayed: (due, arrival, is copy) sorted by due then arrival.
    var model = MQTTChaosModel(configuration: configuration, seed: MQTTChaosModel.streamSeed(
        runSeed: seed, clientIdentifier: Array("drawer".utf8), connectionOrdinal: 0, direction: .clientToBroker))
    var expected: [(due: UInt64, order: Int, index: Int)] = []
    var order = 0
    var duplicates = 0
    for index in 0..<count {
        let decision = model.next()
        expected.append((UInt64(index) * 1000 + decision.delayMicroseconds, order, index))
        order += 1
        if let copy = decision.duplicateDelayMicroseconds {
            expected.append((UInt64(index) * 1000 + copy, order, index))
            order += 1
            duplicates += 1
        }
    }
    // Equal due times leave in the order they were scheduled.
    let expectedIndices = expected.sorted { ($0.due, $0.order) < ($1.due, $1.order) }.map(\.index)
    let sentIndices = wire.toBroker.dropFirst().map { Int($0[$0.count - 2]) << 8 | Int($0[$0.count - 1]) }
    #expect(sentIndices == expectedIndices, "seed \(seed)")
    let counters = session.counters(from: .client)
    #expect(counters.publishes == count && counters.delayed == count && counters.duplicated == duplicates, "seed \(seed)")
    #expect(counters.overtaken > 0 && counters.maximumOvertakenDepth > 1, "seed \(seed)")
    #expect(counters.forwarded == 1 + count + duplicates)
}

@Test func aDuplicatedQoS1PublishGetsDUPAndItsSenderOnePUBACK() throws {
    var session = MQTTChaosSession(configuration: MQTTChaosConfiguration(duplicateChance: 1), runSeed: 4)
    var wire = Wire()
    session.handleBytes(try MQTTPacketBuilder.connect(clientIdentifier: "d"), from: .client, now: 0)
    session.handleBytes(try publish(6, qos: 1), from: .client, now: 0)
    wire.drain(&session)
    #expect(wire.toBroker.count == 3)
    #expect(wire.toBroker[1] == (try publish(6, qos: 1)))
    #expect(wire.toBroker[2] == (try MQTTPacketBuilder.publish(topic: "room/1", payload: [0, 6], qos: 1, packetIdentifier: 7, duplicate: true)))
    // The broker acknowledges both copies; the client sees one PUBACK, later ones for other ids pass.
    session.handleBytes(MQTTPacketBuilder.puback(packetIdentifier: 7) + MQTTPacketBuilder.puback(packetIdentifier: 7)
                        + MQTTPacketBuilder.puback(packetIdentifier: 9), from: .broker, now: 1)
    wire.drain(&session)
    #expect(wire.toClient == [MQTTPacketBuilder.puback(packetIdentifier: 7), MQTTPacketBuilder.puback(packetIdentifier: 9)])
    #expect(session.counters(from: .broker).surplusAcksDropped == 1)
    // The id is free again: a new publish with it is duplicated and tracked afresh.
    session.handleBytes(try publish(6, qos: 1), from: .client, now: 2)
    wire.drain(&session)
    #expect(session.counters(from: .client).duplicated == 2 && session.counters(from: .client).duplicatesSkipped == 0)
}

@Test func disconnectAndEndOfStreamWaitBehindHeldPublishes() throws {
    var session = MQTTChaosSession(configuration: MQTTChaosConfiguration(delayMicroseconds: 10_000), runSeed: 1)
    var wire = Wire()
    session.handleBytes(try MQTTPacketBuilder.connect(clientIdentifier: "e"), from: .client, now: 0)
    session.handleBytes(try publish(1) + MQTTPacketBuilder.disconnect, from: .client, now: 0)
    session.handleEndOfStream(from: .client, now: 1000)
    wire.drain(&session)
    #expect(wire.toBroker.count == 1 && wire.ends.isEmpty)
    #expect(session.nextDeadline == 10_000)
    session.handleTimeout(now: 10_000)
    wire.drain(&session)
    #expect(wire.toBroker == [try MQTTPacketBuilder.connect(clientIdentifier: "e"), try publish(1), MQTTPacketBuilder.disconnect])
    #expect(wire.ends == [.broker])
}

@Test func burstsHoldUntilTheirLastPublishOrTheHoldLimit() throws {
    let configuration = MQTTChaosConfiguration(burstChance: 1, maximumBurstLength: 4)
    var session = MQTTChaosSession(configuration: configuration, runSeed: 8)
    session.maximumBurstHoldMicroseconds = 50_000
    var wire = Wire()
    session.handleBytes(try MQTTPacketBuilder.connect(clientIdentifier: "b"), from: .client, now: 0)
    var model = MQTTChaosModel(configuration: configuration, seed: MQTTChaosModel.streamSeed(
        runSeed: 8, clientIdentifier: Array("b".utf8), connectionOrdinal: 0, direction: .clientToBroker))
    var outCounts: [Int] = []
    var expectedCounts: [Int] = []
    var released = 0
    for index in 0..<20 {
        session.handleBytes(try publish(index), from: .client, now: UInt64(index))
        wire.drain(&session)
        outCounts.append(wire.toBroker.count - 1)
        if model.next().burst == .releases { released = index + 1 }
        expectedCounts.append(released)
    }
    #expect(outCounts == expectedCounts, "seed 8")
    // The unfinished burst leaves when the hold limit passes.
    if released < 20 {
        #expect(session.nextDeadline == UInt64(released) + 50_000)
        session.handleTimeout(now: UInt64(released) + 50_000)
        wire.drain(&session)
        #expect(session.counters(from: .client).burstsCutShort == 1)
    }
    #expect(wire.toBroker.count - 1 == 20)
}

@Test func garbageFromEitherSideIsAFramingError() {
    var session = MQTTChaosSession(configuration: MQTTChaosConfiguration(), runSeed: 1)
    session.handleBytes([0x00, 0x00], from: .broker, now: 0)
    #expect(session.framingError == .reservedPacketType)
}

@Test func theArrivalTapSeesEveryPublishOnceInReadingOrder() throws {
    var session = MQTTChaosSession(configuration: MQTTChaosConfiguration(delayMicroseconds: 5000, duplicateChance: 1), runSeed: 2)
    session.handleBytes(try MQTTPacketBuilder.connect(clientIdentifier: "t") + (try publish(0)), from: .client, now: 0)
    #expect(session.pollArrival() == nil)  // off by default
    session.recordsArrivals = true
    session.handleBytes(try publish(1, qos: 1) + MQTTPacketBuilder.pingreq, from: .client, now: 1)
    session.handleBytes(try publish(2, qos: 2), from: .broker, now: 2)
    let expectedFirst = try publish(1, qos: 1)
    let expectedSecond = try publish(2, qos: 2)
    let first = session.pollArrival()
    let second = session.pollArrival()
    #expect(first?.side == .client && first?.packet.bytes == expectedFirst)
    #expect(second?.side == .broker && second?.packet.bytes == expectedSecond)
    #expect(session.pollArrival() == nil)
}
