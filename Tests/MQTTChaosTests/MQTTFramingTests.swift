import MQTTChaos
import Testing

@Test(arguments: [
    (0, [0x00]), (127, [0x7F]), (128, [0x80, 0x01]), (16_383, [0xFF, 0x7F]), (16_384, [0x80, 0x80, 0x01]),
    (2_097_151, [0xFF, 0xFF, 0x7F]), (2_097_152, [0x80, 0x80, 0x80, 0x01]), (268_435_455, [0xFF, 0xFF, 0xFF, 0x7F]),
] as [(Int, [UInt8])])
func remainingLengthMatchesTheSpecTable(value: Int, encoded: [UInt8]) throws {
    #expect(try MQTTRemainingLength.encode(value) == encoded)
    #expect(try MQTTRemainingLength.decode([0x30] + encoded, from: 1) == .value(value, byteCount: encoded.count))
    #expect(try MQTTRemainingLength.decode([0x30] + encoded.dropLast(), from: 1) == .needMoreBytes)
}

@Test func remainingLengthRefusesAFifthByteAndTooLargeValues() {
    #expect(throws: MQTTFramingError.malformedRemainingLength) { try MQTTRemainingLength.decode([0xFF, 0xFF, 0xFF, 0xFF, 0x01], from: 0) }
    #expect(throws: MQTTFramingError.packetTooLarge(268_435_456)) { try MQTTRemainingLength.encode(268_435_456) }
}

private func samplePackets() throws -> [[UInt8]] {
    [
        try MQTTPacketBuilder.connect(clientIdentifier: "watcher-1"),
        try MQTTPacketBuilder.subscribe(packetIdentifier: 1, topicFilter: "inkwire/room/+/batches", qos: 1),
        try MQTTPacketBuilder.publish(topic: "t", payload: [], qos: 0),
        try MQTTPacketBuilder.publish(topic: "inkwire/room/7/batches", payload: Array(repeating: 0xAB, count: 300), qos: 1, packetIdentifier: 513),
        MQTTPacketBuilder.puback(packetIdentifier: 513),
        MQTTPacketBuilder.pingreq,
        MQTTPacketBuilder.disconnect,
    ]
}

@Test func framerCutsTheSamePacketsWhateverThePieces() throws {
    let packets = try samplePackets()
    let stream = packets.flatMap { $0 }
    for piece in [1, 2, 3, 7, 64, stream.count] {
        var framer = MQTTPacketFramer()
        var out: [[UInt8]] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + piece)
            framer.handleBytes(stream[offset..<end])
            offset = end
            while let packet = try framer.pollPacket() { out.append(packet.bytes) }
        }
        #expect(out == packets, "piece \(piece)")
        #expect(framer.bufferedByteCount == 0)
    }
}

@Test func framerRefusesOversizeReservedAndQoS3() throws {
    var small = MQTTPacketFramer(maximumPacketBytes: 100)
    small.handleBytes([0x30, 0xE4, 0x00])  // PUBLISH announcing 100 bytes in a two-byte length: 103 in all
    #expect(throws: MQTTFramingError.packetTooLarge(103)) { try small.pollPacket() }
    #expect(throws: MQTTFramingError.packetTooLarge(103)) { try small.pollPacket() }  // stays failed

    var reserved = MQTTPacketFramer()
    reserved.handleBytes([0x00, 0x00])
    #expect(throws: MQTTFramingError.reservedPacketType) { try reserved.pollPacket() }

    var qos3 = MQTTPacketFramer()
    qos3.handleBytes([0x36, 0x03, 0x00, 0x01, 0x61])
    #expect(throws: MQTTFramingError.invalidQoS) { try qos3.pollPacket() }
}

@Test func packetReadersFindTopicIdentifierAndClient() throws {
    var framer = MQTTPacketFramer()
    for bytes in try samplePackets() { framer.handleBytes(bytes) }
    let connect = try #require(try framer.pollPacket())
    #expect(connect.type == .connect && connect.connectProtocolLevel == 4)
    #expect(connect.connectClientIdentifier.map(Array.init) == Array("watcher-1".utf8))
    let subscribe = try #require(try framer.pollPacket())
    #expect(subscribe.type == .subscribe && subscribe.packetIdentifier == 1 && subscribe.flags == 0x2)
    let qos0 = try #require(try framer.pollPacket())
    #expect(qos0.publishQoS == 0 && qos0.packetIdentifier == nil && qos0.markedDuplicate() == qos0)
    #expect(qos0.publishPayload().map(Array.init) == [])
    let qos1 = try #require(try framer.pollPacket())
    #expect(qos1.publishQoS == 1 && qos1.packetIdentifier == 513 && !qos1.isDuplicate)
    #expect(qos1.publishTopic.map(Array.init) == Array("inkwire/room/7/batches".utf8))
    #expect(qos1.publishPayload().map(Array.init) == Array(repeating: 0xAB, count: 300))
    let copy = qos1.markedDuplicate()
    #expect(copy.isDuplicate && copy.bytes.dropFirst() == qos1.bytes.dropFirst() && copy.bytes[0] == 0x3A)
    let ack = try #require(try framer.pollPacket())
    #expect(ack.type == .puback && ack.packetIdentifier == 513)
}

@Test func mqtt5ConnectSkipsPropertiesToTheClientIdentifier() throws {
    // Protocol "MQTT", level 5, clean start, keepalive 60, properties (session expiry 0), id "c5".
    let body: [UInt8] = [0, 4, 0x4D, 0x51, 0x54, 0x54, 5, 0x02, 0, 60, 5, 0x11, 0, 0, 0, 0, 0, 2, 0x63, 0x35]
    var framer = MQTTPacketFramer()
    framer.handleBytes(try MQTTPacketBuilder.packet(firstByte: 0x10, body: body))
    let connect = try #require(try framer.pollPacket())
    #expect(connect.connectProtocolLevel == 5)
    #expect(connect.connectClientIdentifier.map(Array.init) == Array("c5".utf8))
}
