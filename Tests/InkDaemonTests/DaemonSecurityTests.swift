import Foundation
import Glibc
import InkCodec
import InkCrypto
import InkProtocol
import Testing
@testable import InkDaemon

/// The real daemon against an attacker on the classroom Wi-Fi (docs/protocol.md 4, 8): it sees
/// every datagram of a lesson and sends what it likes from its own address. Nothing it sends
/// reaches the room, the teacher's session never moves or ends, every member's board equals the
/// teacher's, and the counters show what was dropped. Also: a rogue daemon, protocol 1
/// devices, token expiry and rotation, the key file.
@Suite struct DaemonSecurityTests {
    static let secret = Array("a-school-secret-of-enough-bytes".utf8)
    static var minter: TokenVerifier { TokenVerifier(secret: secret)! }

    static func token(_ user: String, _ role: TokenRole, expiresAt: UInt64 = 4_000_000_000) -> String {
        minter.mint(JoinClaims(room: "lesson", user: user, role: role, expiresAt: expiresAt))
    }

    struct Started {
        let daemon: DaemonProcess
        let udp: UInt16
        let tcp: UInt16
        let metrics: UInt16
        let key: [UInt8]
        let directory: String
    }

    static func start(_ tag: String, extra: [String] = [], dataDir: String? = nil) throws -> Started {
        let directory = DaemonProcess.scratchDirectory(tag)
        writeFile(directory + "/secret", secret + [10])
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
                                        "--token-secret-file", directory + "/secret"] + extra, dataDir: dataDir, tag: tag)
        let fields = try daemon.ready()
        return Started(daemon: daemon, udp: DaemonProcess.port(fields["udp"])!, tcp: DaemonProcess.port(fields["tcp"])!,
                       metrics: DaemonProcess.port(fields["metrics"])!, key: try #require(PublicKeyText.decode(fields["public_key"] ?? "")),
                       directory: directory)
    }

    static func joined(_ c: NativeTestClient, _ user: String, _ role: MemberRole, token: String) -> AuthorID? {
        c.join(room: "lesson", user: user, role: role, token: token)
        guard case .joinAccepted(let member, _, _, _)? = c.next(where: {
            if case .joinAccepted = $0 { true } else if case .joinRefused = $0 { true } else { false }
        }) else { return nil }
        return member
    }

    static func stroke(_ i: Int) -> [Command] {
        let id = StrokeID(UInt32(i + 1))
        return [.point(StrokePoint(stroke: id, phase: .start, x: Int32(1000 * i), y: 50_000)),
                .point(StrokePoint(stroke: id, phase: .move, x: Int32(1000 * i + 300), y: 60_000)),
                .point(StrokePoint(stroke: id, phase: .end, x: Int32(1000 * i + 900), y: 70_000))]
    }

    /// A socket on loopback that sends to the daemon from an address of its own.
    final class Attacker {
        let fd: Int32
        init(port: UInt16) throws { fd = try connectLoopback(port: port, type: SOCK_DGRAM) }
        deinit { close(fd) }
        func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) } }
        /// What the daemon sent back, without waiting.
        func drain() -> [[UInt8]] {
            var out: [[UInt8]] = []
            var buffer = [UInt8](repeating: 0, count: 2048)
            while true {
                let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if n <= 0 { return out }
                out.append(Array(buffer[..<n]))
            }
        }
    }

    @Test func anAttackerOnTheWiFiChangesNothing() throws {
        let s = try Self.start("attacker", extra: ["--new-sessions-per-second", "50"])
        defer { withExtendedLifetime(s.daemon) {} }
        let tap = try UDPTap(daemonPort: s.udp)
        tap.start()
        defer { tap.stop() }
        let teacher = try NativeTestClient(.udp, port: tap.port, serverKey: s.key)
        let author = try #require(Self.joined(teacher, "teacher", .teacher, token: Self.token("teacher", .teacher)), "\(s.daemon.log)")
        let udpWatcher = try NativeTestClient(.udp, port: s.udp, serverKey: s.key)
        #expect(Self.joined(udpWatcher, "w1", .viewer, token: Self.token("w1", .viewer)) != nil)
        let tcpWatcher = try NativeTestClient(.tcp, port: s.tcp, serverKey: s.key)
        #expect(Self.joined(tcpWatcher, "w2", .viewer, token: Self.token("w2", .viewer)) != nil)
        let attacker = try Attacker(port: s.udp)
        let crypto = OpenSSLCrypto()

        var teacherBoard = Board()
        let batches = 30
        for i in 0..<batches {
            let commands = Self.stroke(i)
            teacher.sendBatch(commands, originSeq: UInt64(i + 1), author: author)
            for c in commands { teacherBoard.apply(c, author: author) }
            teacher.idle(microseconds: 20_000)
            let seen = tap.toDaemon
            switch i {
            case 3:
                // Replays of everything seen so far, the initiation included (its join carries a
                // valid token: a session opens that nobody can continue).
                for d in seen { attacker.send(d) }
            case 6:
                // Forgeries with the teacher's connection id: flipped bits, other packet numbers,
                // random bodies, a "close" sealed with a key of the attacker's.
                for d in seen where PacketCodec.peek(d)?.type.isTransport == true {
                    var flipped = d
                    flipped[flipped.count - 1] ^= 1
                    attacker.send(flipped)
                    var renumbered = d
                    renumbered[12] &+= 100
                    attacker.send(renumbered)
                }
                let cid = PacketCodec.peek(seen[0])!.connectionID
                for n in 0..<50 {
                    var packet = [UInt8](repeating: 0, count: 13)
                    packet[0] = 0x20 | UInt8(n & 1)
                    for k in 0..<8 { packet[1 + k] = UInt8(truncatingIfNeeded: cid >> UInt64(56 - 8 * k)) }
                    packet[12] = UInt8(200 + n)
                    packet += crypto.randomBytes(5 + n)
                    attacker.send(packet)
                }
            case 9:
                // The race: each fresh teacher datagram is also sent from the attacker's
                // address, just before the tap passes the original on.
                tap.onDeviceDatagram { d in attacker.send(d) }
            case 15:
                tap.onDeviceDatagram(nil)
                // A forged reset and a forged close toward the teacher (through the Wi-Fi).
                let cid = PacketCodec.peek(seen[0])!.connectionID
                tap.injectToDevice(PacketCodec.reset(connectionID: cid, token: crypto.randomBytes(16)))
                tap.injectToDevice([0x20] + (0..<8).map { UInt8(truncatingIfNeeded: cid >> UInt64(56 - 8 * $0)) } + crypto.randomBytes(40))
            case 18:
                // A join flood: initiations to another key, initiations of the right key whose
                // join has no valid token, garbage and protocol 1 frames.
                for n in 0..<150 {
                    let join = SessionMessageCodec.encode(.join(JoinRequest(room: "lesson", user: "mallory\(n)", role: .teacher,
                                                                               token: Array("iw1.forged.token".utf8), origin: UInt64(n + 1))))
                    let key = n % 2 == 0 ? s.key : crypto.randomBytes(32)
                    let session = SealedDatagramSession(deviceConnectionID: UInt64.random(in: 1...UInt64.max), serverKey: key, join: join,
                                                        crypto: crypto, now: .zero)
                    if let first = session.pollTransmit(now: .zero) { attacker.send(first.bytes) }
                    attacker.send(crypto.randomBytes(1 + n % 300))
                }
                attacker.send(protocolOneJoinDatagram(user: "old"))
            default:
                break
            }
        }
        teacher.idle(microseconds: 300_000)

        // Every batch acknowledged, in order, to the teacher's one session.
        var acked: UInt64 = 0
        while case .batchAck(let originSeq, _)? = teacher.next(limitMicroseconds: 500_000, where: { if case .batchAck = $0 { true } else { false } }) {
            acked = max(acked, originSeq)
            if acked == UInt64(batches) { break }
        }
        #expect(acked == UInt64(batches))
        #expect(!teacher.closedByPeer)
        // The watchers' boards are the teacher's: exactly its batches, in order, nothing else.
        for watcher in [udpWatcher, tcpWatcher] {
            var board = Board()
            var seqs: [UInt64] = []
            while let (batch, commands) = watcher.nextRoomBatch(limitMicroseconds: 500_000) {
                #expect(batch.author == author)
                seqs.append(batch.roomSeq)
                for c in commands { board.apply(c, author: batch.author) }
            }
            #expect(seqs == Array(1...UInt64(batches)))
            #expect(board.digest == teacherBoard.digest)
        }
        // The teacher's session never moved and was never replaced.
        let log = s.daemon.log
        #expect(!log.contains("msg=\"session moved\""), "\(log)")
        #expect(teacher.sealed?.stats.forgedResets == 1)
        #expect(teacher.sealed?.isEstablished == true)
        let metrics = try fetchMetrics(port: s.metrics)
        for kind in ["unauthenticated_packet", "replayed_packet", "garbage_datagram", "protocol1_refused"] {
            #expect((metricValue(metrics, "inkwire_errors_total{kind=\"\(kind)\"}") ?? 0) >= 1, "\(kind)\n\(metrics)")
        }
        #expect((metricValue(metrics, "inkwire_handshakes_total{result=\"key_mismatch\"}") ?? 0) >= 1, "\(metrics)")
        #expect((metricValue(metrics, "inkwire_refused_joins_total{reason=\"badToken\"}") ?? 0) >= 1, "\(metrics)")
        #expect((metricValue(metrics, "inkwire_errors_total{kind=\"session_rate_limited\"}") ?? 0) >= 1, "\(metrics)")
        // What the attacker got back: sealed packets (probes of its address, which the race made
        // a candidate, and its own handshakes' refusals), notices, its protocol 1 refusal: small,
        // and none of them the room's.
        let received = attacker.drain()
        #expect(received.contains { PacketCodec.peek($0)?.type.isTransport == true })
        #expect(received.contains { PacketCodec.peek($0)?.type == .notice })
        #expect(received.allSatisfy { $0.count <= 200 }, "\(received.map(\.count).max() ?? 0)")
    }

    /// A daemon with another key stands in for the real one: a pinned device refuses it.
    @Test func aRogueDaemonCannotCompleteAJoin() throws {
        let real = try Self.start("real")
        let rogue = try Self.start("rogue")
        defer { withExtendedLifetime((real.daemon, rogue.daemon)) {} }
        #expect(real.key != rogue.key)
        for scheme in ["udp", "tcp"] {
            let port = scheme == "udp" ? rogue.udp : rogue.tcp
            let watch = try ClientProcess.run(["watch", "--server", "\(scheme)://127.0.0.1:\(port)", "--server-key", PublicKeyText.encode(real.key),
                                               "--room", "lesson", "--user", "w", "--token", Self.token("w", .viewer), "--timeout", "5"],
                                              directory: rogue.directory)
            #expect(watch.exitStatus == 7, "\(scheme): \(watch.errors)")
            #expect(watch.errors.contains("did not prove key \(PublicKeyText.encode(real.key))"), "\(watch.errors)")
            #expect(watch.errors.contains("it presents \(PublicKeyText.encode(rogue.key))"), "\(watch.errors)")
        }
        #expect(!rogue.daemon.log.contains("msg=\"member joined\""))
        // The same device with the real key joins.
        let ok = try ClientProcess(["watch", "--server", "udp://127.0.0.1:\(real.udp)", "--server-key", PublicKeyText.encode(real.key),
                                    "--room", "lesson", "--user", "w", "--token", Self.token("w", .viewer), "--idle-exit", "1"],
                                   directory: real.directory)
        #expect(real.daemon.waitForLine(containing: "msg=\"member joined\" room=lesson") != nil)
        ok.wait()
    }

    /// Trust on first use: the first join keeps the key; a different daemon later at the same
    /// address is refused.
    @Test func anUnpinnedDeviceKeepsTheFirstKeyAndRefusesAnother() throws {
        let first = try Self.start("tofu-1")
        let known = first.directory + "/known-daemons"
        let arguments = ["--room", "lesson", "--user", "w", "--token", Self.token("w", .viewer), "--idle-exit", "1", "--timeout", "5"]
        let watch = try ClientProcess.run(["watch", "--server", "udp://127.0.0.1:\(first.udp)"] + arguments, directory: first.directory)
        #expect(watch.exitStatus == 0, "\(watch.errors)")
        #expect(watch.errors.contains("trusting udp://127.0.0.1:\(first.udp)'s key \(PublicKeyText.encode(first.key)) on first use"))
        #expect(String(decoding: readFile(known), as: UTF8.self) == "127.0.0.1:\(first.udp) \(PublicKeyText.encode(first.key))\n")
        let port = first.udp
        first.daemon.signal(SIGTERM)
        _ = first.daemon.waitExit()
        // Another daemon (another key) on the same port.
        let second = try DaemonProcess(["--udp", "127.0.0.1:\(port)", "--tcp", "off"], tag: "tofu-2")
        _ = try second.ready()
        let again = try ClientProcess.run(["watch", "--server", "udp://127.0.0.1:\(port)"] + arguments, directory: first.directory)
        #expect(again.exitStatus == 7, "\(again.errors)")
        #expect(again.errors.contains("remove its line from \(known)"), "\(again.errors)")
    }

    /// An old (protocol 1, unsealed) device is told why, in the framing it reads.
    @Test func protocolOneDevicesGetAVersionedRefusal() throws {
        let s = try Self.start("v1")
        defer { withExtendedLifetime(s.daemon) {} }
        let join = SessionMessageCodec.encode(.join(JoinRequest(room: "lesson", user: "old", role: .viewer, origin: 9)))
        let udp = try NativeTestClient(.udp, port: s.udp)
        udp.sendRaw(protocolOneJoinDatagram(user: "old"))
        let answer = try #require(udp.receiveRaw())
        #expect(answer[0] == 0x10 && answer[2] == 0x07)
        let body = Array(answer[0..<(answer.count - 4)])
        let check = CRC32C.checksum(body)
        #expect(Array(answer.suffix(4)) == [UInt8(check >> 24), UInt8(check >> 16 & 0xff), UInt8(check >> 8 & 0xff), UInt8(check & 0xff)])
        let message = try #require(answer.firstRange(of: [0x01, 0x21]).map { Array(answer[$0.lowerBound..<(answer.count - 4)]) })
        guard case .joinRefused(let reason, let text) = try SessionMessageCodec.decodeServer(message) else {
            Issue.record("no refusal in \(answer)")
            return
        }
        #expect(reason == .unsupportedVersion)
        #expect(text.contains("protocol 2"))
        // TCP: the length-prefixed protocol 1 join gets the refusal, then the stream closes.
        let tcp = try NativeTestClient(.tcp, port: s.tcp)
        tcp.sendRaw(StreamFrameDecoder.frame(join))
        let bytes = try #require(tcp.receiveRaw())
        #expect(Array(bytes.dropFirst(4)) == ProtocolOneRefusal.message)
        #expect(s.daemon.waitForLine(containing: "refused a protocol 1 (unsealed) native device") != nil)
        let metrics = try fetchMetrics(port: s.metrics)
        #expect((metricValue(metrics, "inkwire_errors_total{kind=\"protocol1_refused\"}") ?? 0) >= 2)
    }

    /// A session's right ends with its token: at expiry, and when the secret changes.
    @Test func tokensEndTheirSessions() throws {
        let s = try Self.start("token-end")
        defer { withExtendedLifetime(s.daemon) {} }
        let soon = WallClock.seconds() + 2
        let short = try NativeTestClient(.tcp, port: s.tcp, serverKey: s.key)
        #expect(Self.joined(short, "ada", .viewer, token: Self.token("ada", .viewer, expiresAt: soon)) != nil)
        let long = try NativeTestClient(.udp, port: s.udp, serverKey: s.key)
        #expect(Self.joined(long, "bob", .viewer, token: Self.token("bob", .viewer)) != nil)
        guard case .goingAway(let reason, let text)? = short.next(limitMicroseconds: 5_000_000, where: { if case .goingAway = $0 { true } else { false } }) else {
            Issue.record("no goodbye at expiry")
            return
        }
        #expect(reason == .tokenExpired && text.contains("expired"))
        writeFile(s.directory + "/secret", Array("the-next-term-secret-0123456789".utf8))
        s.daemon.signal(SIGHUP)
        guard case .goingAway(let why, let reasonText)? = long.next(limitMicroseconds: 5_000_000, where: { if case .goingAway = $0 { true } else { false } }) else {
            Issue.record("no goodbye after the secret changed")
            return
        }
        #expect(why == .tokenRevoked && reasonText.contains("secret changed"))
        let metrics = try fetchMetrics(port: s.metrics)
        #expect(metricValue(metrics, "inkwire_errors_total{kind=\"token_expired\"}") == 1)
        #expect(metricValue(metrics, "inkwire_errors_total{kind=\"token_revoked\"}") == 1)
    }

    /// The acknowledged-never-stored case: an origin that skips ahead or reuses a number with
    /// other commands gets a typed error, counted; the ack names only what is in the log.
    @Test func originSeqGapsAndReusesAreRefusedAndCounted() throws {
        let s = try Self.start("originseq")
        defer { withExtendedLifetime(s.daemon) {} }
        let pen = try NativeTestClient(.tcp, port: s.tcp, serverKey: s.key)
        let author = try #require(Self.joined(pen, "teacher", .teacher, token: Self.token("teacher", .teacher)))
        func answer() -> ServerMessage? {
            pen.next(where: { if case .batchAck = $0 { true } else if case .error = $0 { true } else { false } })
        }
        pen.sendBatch(Self.stroke(0), originSeq: 1, author: author)
        #expect(answer() == .batchAck(originSeq: 1, roomSeq: 1))
        pen.sendBatch(Self.stroke(1), originSeq: 1_000_000, author: author)
        guard case .error(.originSeqGap, 1_000_000, _)? = answer() else { Issue.record("no gap error"); return }
        pen.sendBatch(Self.stroke(2), originSeq: 1, author: author)
        guard case .error(.originSeqReused, 1, _)? = answer() else { Issue.record("no reuse error"); return }
        pen.sendBatch(Self.stroke(0), originSeq: 1, author: author)
        #expect(answer() == .batchAck(originSeq: 1, roomSeq: 1))
        pen.sendBatch(Self.stroke(3), originSeq: 2, author: author)
        #expect(answer() == .batchAck(originSeq: 2, roomSeq: 2))
        let metrics = try fetchMetrics(port: s.metrics)
        #expect(metricValue(metrics, "inkwire_errors_total{kind=\"refused_batch_originSeqGap\"}") == 1)
        #expect(metricValue(metrics, "inkwire_errors_total{kind=\"refused_batch_originSeqReused\"}") == 1)
    }

    @Test func theDaemonKeyIsPrivateAndPrintable() throws {
        let directory = DaemonProcess.scratchDirectory("key")
        let printer = try DaemonProcess(["--print-public-key", "--data-dir", directory + "/data"], tag: "key-print")
        #expect(printer.waitExit() == 0)
        let printed = printer.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        var info = stat()
        #expect(stat(directory + "/data/daemon-key", &info) == 0 && info.st_mode & 0o777 == 0o600)
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off", "--data-dir", directory + "/data"], tag: "key-run")
        #expect(try daemon.ready()["public_key"] == printed)
        daemon.signal(SIGTERM)
        _ = daemon.waitExit()
        // --key-file: read, never created; a file others may read is refused.
        let keyFile = directory + "/key"
        writeFile(keyFile, Array((String(repeating: "ab", count: 32) + "\n").utf8))
        chmod(keyFile, 0o644)
        let loose = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off", "--key-file", keyFile, "--data-dir", directory + "/d2"], tag: "key-loose")
        #expect(loose.waitExit() == 2)
        #expect(loose.log.contains("readable by others"))
        chmod(keyFile, 0o600)
        let fromFile = try DaemonProcess(["--print-public-key", "--key-file", keyFile], tag: "key-file")
        #expect(fromFile.waitExit() == 0)
        #expect(fromFile.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == PublicKeyText.encode(
            OpenSSLCrypto().x25519PublicKey(privateKey: [UInt8](repeating: 0xab, count: 32))))
        let missing = try DaemonProcess(["--print-public-key", "--key-file", directory + "/none"], tag: "key-missing")
        #expect(missing.waitExit() == 2)
    }
}

/// A protocol 1 device's first datagram: 10, flags, cid 7, timestamp, segment 0 carrying its
/// join, CRC-32C.
private func protocolOneJoinDatagram(user: String) -> [UInt8] {
    let join = SessionMessageCodec.encode(.join(JoinRequest(room: "lesson", user: user, role: .viewer, origin: 9)))
    var frame: [UInt8] = [0x10, 0x00, 0x07, 0, 0, 0x4e, 0x20, 0x00]
    frame += leb128(UInt64(join.count) << 1 | 1) + join
    let crc = CRC32C.checksum(frame)
    return frame + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xff), UInt8(crc >> 8 & 0xff), UInt8(crc & 0xff)]
}

private func leb128(_ v: UInt64) -> [UInt8] {
    var v = v
    var out: [UInt8] = []
    while v >= 0x80 {
        out.append(UInt8(truncatingIfNeeded: v) | 0x80)
        v >>= 7
    }
    return out + [UInt8(v)]
}
