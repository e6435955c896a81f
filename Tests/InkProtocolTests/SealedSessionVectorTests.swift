import Foundation
import InkCodec
import InkCrypto
import Testing
@testable import InkProtocol

/// `Vectors/sealed-sessions.txt` (written by an independent Python implementation of
/// docs/protocol.md 4): the Swift handshake, packet protection, key update, stream form and
/// resets give exactly its bytes from its fixed keys, over OpenSSL.
@Suite struct SealedSessionVectorTests {
    static let vectors: [String: [UInt8]] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = (try? String(contentsOf: root.appendingPathComponent("Vectors/sealed-sessions.txt"), encoding: .utf8)) ?? ""
        var out: [String: [UInt8]] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let digits = line[line.index(after: colon)...].filter { !$0.isWhitespace }
            let chars = Array(digits)
            out[String(line[..<colon])] = stride(from: 0, to: chars.count - 1, by: 2).map { UInt8(String(chars[$0...$0 + 1]), radix: 16)! }
        }
        return out
    }()

    static func v(_ name: String) -> [UInt8] {
        guard let value = vectors[name] else {
            Issue.record("vector \(name) missing")
            return []
        }
        return value
    }

    let crypto = OpenSSLCrypto()
    var staticKey: StaticKeyPair { StaticKeyPair(privateKey: Self.v("daemon-static-private"), crypto: crypto) }
    var cid: UInt64 { Self.v("connection-id").reduce(0) { $0 << 8 | UInt64($1) } }

    @Test func keysAreX25519OfTheFixedPrivateKeys() {
        #expect(staticKey.publicKey == Self.v("daemon-static-public"))
        #expect(crypto.x25519PublicKey(privateKey: Self.v("device-ephemeral-private")) == Self.v("device-ephemeral-public"))
        #expect(crypto.x25519PublicKey(privateKey: Self.v("daemon-ephemeral-private")) == Self.v("daemon-ephemeral-public"))
    }

    @Test func theJoinIsTheSessionMessage() throws {
        let token = Array("iw1.bWF0aHMKdGVhY2hlcgp0ZWFjaGVyCjE5MDAwMDAwMDA.2clxQVQI2YlITXjcOKQYwdUFOwQ3vqYSXghxdhXrEn0".utf8)
        let join = SessionMessageCodec.encode(.join(JoinRequest(room: "maths", user: "teacher", role: .teacher, token: token, origin: 42)))
        #expect(join == Self.v("join-message"))
        #expect(SessionMessageCodec.encode(ServerMessage.joinAccepted(member: AuthorID(1), role: .teacher, roomHead: 0, syncFollows: false))
                == Self.v("stream-daemon-plaintext-0"))
    }

    /// Both sessions as the daemon and a device run them: every packet of the handshake.
    @Test func datagramHandshakeGivesTheVectorsPackets() throws {
        let device = SealedDatagramSession(deviceConnectionID: cid, serverKey: staticKey.publicKey, join: Self.v("join-message"),
                                           crypto: crypto, now: .zero, ephemeralPrivate: Self.v("device-ephemeral-private"))
        let initiation = try #require(device.pollTransmit(now: .zero))
        #expect(initiation.bytes == Self.v("datagram-initiation"))
        let reset = StatelessReset(staticPrivateKey: staticKey.privateKey, crypto: crypto)
        #expect(reset.token(connectionID: cid) == Self.v("reset-token"))
        #expect(reset.packet(connectionID: cid) == Self.v("reset-packet"))
        let (daemon, join) = try SealedDatagramSession.accept(initiation: initiation.bytes, staticKey: staticKey, reset: reset, crypto: crypto,
                                                              now: .zero, ephemeralPrivate: Self.v("daemon-ephemeral-private")).get()
        #expect(join == Self.v("join-message"))
        let response = try #require(daemon.pollTransmit(now: .zero))
        #expect(response.bytes == Self.v("datagram-response"))
        #expect(device.handleDatagram(response.bytes, now: .zero) == .accepted)
        #expect(device.isEstablished)
        #expect(device.pollEvent() == .established)
        // A reset with the token ends the device's session; the vector's reset is that one.
        #expect(device.handleDatagram(Self.v("reset-packet"), now: .zero) == .accepted)
        #expect(device.pollEvent() == .reset)
    }

    @Test func handshakeHashAndTransportKeys() throws {
        var initiator = NoiseInitiator(crypto: crypto, responderStatic: staticKey.publicKey, transport: .datagram, connectionID: cid,
                                       ephemeralPrivate: Self.v("device-ephemeral-private"))
        let written = initiator.writeMessage1(payload: Self.v("join-message"))
        let m1 = try #require(written)
        let opened = try #require(NoiseResponder.readMessage1(m1, crypto: crypto, staticKey: staticKey, transport: .datagram, connectionID: cid))
        var responder = opened.0
        let answered = responder.writeMessage2(payload: Self.v("reset-token"), ephemeralPrivate: Self.v("daemon-ephemeral-private"))
        let (m2, daemonKeys) = try #require(answered)
        let (_, deviceKeys) = try #require(initiator.readMessage2(m2))
        #expect(deviceKeys.handshakeHash == Self.v("datagram-handshake-hash"))
        #expect(daemonKeys.handshakeHash == Self.v("datagram-handshake-hash"))
        #expect(deviceKeys.send == Self.v("datagram-key-device-to-daemon"))
        #expect(deviceKeys.receive == Self.v("datagram-key-daemon-to-device"))
        #expect(daemonKeys.send == deviceKeys.receive && daemonKeys.receive == deviceKeys.send)
    }

    private func keys(device: Bool) -> SessionKeys {
        let d2d = Self.v("datagram-key-device-to-daemon"), d2v = Self.v("datagram-key-daemon-to-device")
        return device ? SessionKeys(send: d2d, receive: d2v, handshakeHash: []) : SessionKeys(send: d2v, receive: d2d, handshakeHash: [])
    }

    private func seal(_ frame: [UInt8], with keys: TransportKeys, now: Instant = .zero) -> [UInt8] {
        var packet = [UInt8](repeating: 0, count: PacketCodec.transportHeaderBytes) + frame
        keys.sealDatagram(&packet, connectionID: cid, now: now)
        return packet
    }

    private func open(_ packet: [UInt8], with keys: TransportKeys, now: Instant = .zero) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: packet.count)
        let outcome = packet.withUnsafeBytes { p in out.withUnsafeMutableBytes { keys.openDatagram(p, now: now, output: $0) } }
        guard case .opened(_, let count) = outcome else { return nil }
        return Array(out[0..<count])
    }

    @Test func firstTransportPacketsBothWays() throws {
        let device = TransportKeys(keys: keys(device: true), crypto: crypto, configuration: SealingConfiguration(), now: .zero)
        let daemon = TransportKeys(keys: keys(device: false), crypto: crypto, configuration: SealingConfiguration(), now: .zero)
        #expect(seal(Self.v("device-frame-0"), with: device) == Self.v("device-packet-0"))
        #expect(seal(Self.v("daemon-frame-0"), with: daemon) == Self.v("daemon-packet-0"))
        #expect(open(Self.v("device-packet-0"), with: daemon) == Self.v("device-frame-0"))
        #expect(open(Self.v("daemon-packet-0"), with: device) == Self.v("daemon-frame-0"))
        #expect(try FrameCodec.decode(Self.v("daemon-frame-0")).segments.first?.payload == Self.v("stream-daemon-plaintext-0"))
        // Replayed: refused before decryption.
        var out = [UInt8](repeating: 0, count: 64)
        let again = Self.v("device-packet-0").withUnsafeBytes { p in out.withUnsafeMutableBytes { daemon.openDatagram(p, now: .zero, output: $0) } }
        #expect(again == .replayed)
    }

    @Test func keyUpdateDerivesThePhaseOneKeysAndOpensTheirPacket() throws {
        #expect(TransportKeys.rekey(crypto.aead(key: Self.v("datagram-key-device-to-daemon"))) == Self.v("phase1-key-device-to-daemon"))
        #expect(TransportKeys.rekey(crypto.aead(key: Self.v("datagram-key-daemon-to-device"))) == Self.v("phase1-key-daemon-to-device"))
        let daemon = TransportKeys(keys: keys(device: false), crypto: crypto, configuration: SealingConfiguration(), now: .zero)
        #expect(seal(Self.v("daemon-frame-0"), with: daemon) == Self.v("daemon-packet-0"))
        #expect(open(Self.v("device-packet-0"), with: daemon) == Self.v("device-frame-0"))
        #expect(open(Self.v("device-packet-5-phase-1"), with: daemon) == Self.v("device-frame-5"))
        #expect(daemon.receivePhase == 1)
        // The daemon follows: its next packet is sealed in phase 1 with the updated key.
        let next = seal([0x08, 0, 0, 0, 1], with: daemon)
        #expect(next[0] == 0x21)
        // The device follows the daemon's update the same way; the phase bit is authenticated.
        let device = TransportKeys(keys: keys(device: true), crypto: crypto, configuration: SealingConfiguration(), now: .zero)
        #expect(open(Self.v("daemon-packet-0"), with: device) == Self.v("daemon-frame-0"))
        var swapped = next
        swapped[0] = 0x20
        #expect(open(swapped, with: device) == nil)
        #expect(open(next, with: device) == [0x08, 0, 0, 0, 1])
        #expect(device.receivePhase == 1 && device.sendPhase == 1)
    }

    @Test func streamSessionGivesTheVectorsMessages() throws {
        let device = SealedStreamSession(serverKey: staticKey.publicKey, join: Self.v("join-message"), crypto: crypto,
                                         ephemeralPrivate: Self.v("device-ephemeral-private"))
        let initiation = try #require(device.pollMessage())
        #expect(initiation == Self.v("stream-initiation"))
        let (daemon, join) = try SealedStreamSession.accept(initiation: initiation, staticKey: staticKey, crypto: crypto, now: .zero,
                                                            ephemeralPrivate: Self.v("daemon-ephemeral-private")).get()
        #expect(join == Self.v("join-message"))
        let response = try #require(daemon.pollMessage())
        #expect(response == Self.v("stream-response"))
        try device.handleMessage(response, now: .zero)
        #expect(device.pollEvent() == .established)
        let keepalive = try #require(device.pollMessage())
        #expect(keepalive == Self.v("stream-device-message-0"))
        daemon.send(Self.v("stream-daemon-plaintext-0"), now: .zero)
        let accepted = try #require(daemon.pollMessage())
        #expect(accepted == Self.v("stream-daemon-message-0"))
        try daemon.handleMessage(keepalive, now: .zero)
        #expect(daemon.pollEvent() == .confirmed)
        #expect(daemon.pollEvent() == nil)
        try device.handleMessage(accepted, now: .zero)
        #expect(device.pollEvent() == .delivered(Self.v("stream-daemon-plaintext-0")))
    }

    @Test func noticesAndKeyRequests() {
        #expect(PacketCodec.notice(connectionID: cid, code: .keyMismatch, key: staticKey.publicKey) == Self.v("notice-key-mismatch"))
        #expect(PacketCodec.keyRequest(connectionID: cid) == Self.v("key-request"))
        #expect(PacketCodec.keyReply(connectionID: cid, key: staticKey.publicKey) == Self.v("key-reply"))
        #expect(PacketCodec.parseNotice(Self.v("notice-key-mismatch"))?.key == staticKey.publicKey)
    }
}
