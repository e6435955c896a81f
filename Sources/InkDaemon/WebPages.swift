import CSSL
import InkProtocol
import InkRelay
import InkVersion
import InkWeb
import InkWebAssets

/// SHA-1 from OpenSSL, for the WebSocket handshake's accept value (not for security: RFC 6455
/// uses it only to show the server understood the handshake).
enum WebCrypto {
    static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { p in _ = SHA1(p.baseAddress, p.count, &out) }
        return out
    }
}

/// What the web listener answers to a GET: its built-in files, the board page of a room, the
/// status as JSON (what the status page shows), and the certificate it made.
struct WebPages {
    let daemon: Daemon
    let listener: WebListener

    func response(path: String) -> (Int, String, [UInt8])? {
        switch path {
        case "/", "/index.html":
            return asset("/index.html")
        case "/status.json":
            return (200, "application/json", statusJSON())
        case "/info.json":
            return (200, "application/json", infoJSON())
        case "/certificate.pem":
            guard let cert = daemon.webCertificate, let bytes = FileSystem.read(cert.certificateFile, limit: 64 * 1024) else { return nil }
            return (200, "application/x-pem-file", bytes)
        default:
            break
        }
        if path.hasPrefix("/room/") {
            guard WebPages.roomName(fromPath: path) != nil else { return nil }
            return asset("/room.html")
        }
        return asset(path)
    }

    private func asset(_ path: String) -> (Int, String, [UInt8])? {
        // Pages are served by their routes above, never as files.
        guard !path.hasSuffix(".html") || path == "/index.html" || path == "/room.html", let file = WebAssets.file(path) else { return nil }
        return (200, file.contentType, file.bytes)
    }

    /// The room of `/room/NAME` (percent-decoded, 1 to 64 bytes, no control characters).
    static func roomName(fromPath path: String) -> String? {
        let raw = path.dropFirst("/room/".count)
        guard !raw.isEmpty, !raw.contains("/"), let name = percentDecoded(raw) else { return nil }
        guard name.utf8.count <= SessionMessageCodec.maxRoomNameBytes, name.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else {
            return nil
        }
        return name
    }

    /// The daemon's facts a page needs before it joins.
    func infoJSON() -> [UInt8] {
        let w = JSONWriter()
        w.object {
            w.field("version", InkwireVersion.string)
            w.field("tokenRequired", daemon.tokenVerifier != nil)
            // Sealed sessions (docs/protocol.md 4, 8.5): every session is sealed; a page pins this key.
            w.field("sealing", "required")
            w.field("protocol", 2)
            w.field("publicKey", PublicKeyText.encode(daemon.staticKey.publicKey))
            w.field("subprotocol", WebSocketHandshake.subprotocol)
            if let cert = daemon.webCertificate {
                w.field("certificateSHA256", cert.fingerprint)
                w.field("certificateSelfMade", cert.isSelfMade)
            }
        }
        return w.bytes
    }

    /// Rooms, their members (transport, address, RTT, loss) and history, as the status page shows them.
    func statusJSON() -> [UInt8] {
        let driver = daemon.driver
        let relay = driver.relay
        var history: [String: (bytes: Int, batches: Int)] = [:]
        for info in daemon.store.rooms() { history[info.name] = (info.historyBytes, info.recordCount) }
        let w = JSONWriter()
        w.object {
            w.field("version", InkwireVersion.string)
            w.field("uptimeSeconds", Int((daemon.loop.now - daemon.startedAt) / 1_000_000))
            w.field("tokenRequired", daemon.tokenVerifier != nil)
            w.field("sealing", "required")
            w.field("publicKey", PublicKeyText.encode(daemon.staticKey.publicKey))
            if let cert = daemon.webCertificate {
                w.field("certificateSHA256", cert.fingerprint)
                w.field("certificateSelfMade", cert.isSelfMade)
            }
            w.key("listeners")
            w.object {
                w.field("udp", daemon.udp.compactMap { $0.localAddress?.description })
                w.field("tcp", daemon.tcp.compactMap { $0.localAddress?.description })
                w.field("web", daemon.web.compactMap { $0.localAddress?.description })
                w.field("legacy", daemon.legacyListeners.compactMap { l in l.localAddress.map { "\($0)=\(l.room)" } })
            }
            w.key("rooms")
            w.array {
                for name in relay.roomNames {
                    w.object {
                        w.field("name", name)
                        w.field("roomSeq", Int(relay.roomHead(name) ?? 0))
                        w.field("strokes", relay.board(name)?.strokeCount ?? 0)
                        w.field("historyBytes", history[name]?.bytes ?? 0)
                        w.field("historyBatches", history[name]?.batches ?? 0)
                        w.key("members")
                        w.array {
                            for session in relay.sessions(in: name) {
                                guard let member = relay.member(session), let (transport, kind) = driver.transport(of: session) else { continue }
                                let link = transport.linkStatus
                                w.object {
                                    w.field("user", relay.memberUser(session) ?? "?")
                                    w.field("member", Int(member.author.rawValue))
                                    w.field("role", member.role.description)
                                    w.field("transport", kind.rawValue)
                                    w.field("address", link.address)
                                    w.field("rttMs", link.rttMs)
                                    w.field("lossPercent", link.lossPercent)
                                    w.field("live", relay.isLive(session))
                                    w.field("sealed", link.sealed)
                                }
                            }
                        }
                    }
                }
            }
        }
        return w.bytes
    }
}
