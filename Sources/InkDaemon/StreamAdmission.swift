import InkProtocol

/// What the daemon does with the first message of a native stream: a TCP connection's or a
/// browser's WebSocket (docs/protocol.md 8.2, 8.5). Both are the same sealed stream; they differ
/// only in how a message is framed, so the decision lives here once.
enum StreamAdmission {
    /// A sealed session: its response is the stream's first `pollMessage`, and `join` (the
    /// handshake's payload, already checked to be a join) goes to the relay.
    case accepted(SealedStreamSession, join: [UInt8])
    /// Write this message and wait for the initiation (the answer to a key request).
    case answer([UInt8])
    /// Write this message, then half-close and close (a protocol 1 refusal, a notice).
    case answerAndClose([UInt8], reason: String)
    /// Close at once, without an answer.
    case close(String)
}

extension Daemon {
    /// The first message of a stream from `remote`. `keyRequested`: this stream has asked for
    /// the key before (a second request closes it).
    func admitStream(_ message: [UInt8], remote: String, keyRequested: Bool) -> StreamAdmission {
        if SealedStreamSession.isProtocolOne(firstMessage: message) {
            metrics.errors(kind: "protocol1_refused").increment()
            logger.notice("refused a protocol 1 (unsealed) native device: it must be updated", ["remote": remote])
            return .answerAndClose(ProtocolOneRefusal.message, reason: "protocol 1 device refused")
        }
        if SealedStreamSession.isKeyRequest(message) {
            // An unpinned device learns the key; its initiation follows on this stream (once).
            guard !keyRequested else { return .close("a second key request") }
            return .answer(SealedStreamSession.keyReply(key: staticKey.publicKey))
        }
        handshakes.perSecond = config.limits.maxHandshakesPerSecond
        guard handshakes.allow(nowMicroseconds: loop.now) else {
            metrics.errors(kind: "handshakes_rate_limited").increment()
            return .answerAndClose(SealedStreamSession.notice(.busy, key: staticKey.publicKey), reason: "busy")
        }
        let now = Instant(microseconds: loop.now)
        switch SealedStreamSession.accept(initiation: message, staticKey: staticKey, crypto: crypto, now: now) {
        case .failure(.keyMismatch):
            metrics.handshakes.labels("key_mismatch").increment()
            return .answerAndClose(SealedStreamSession.notice(.keyMismatch, key: staticKey.publicKey), reason: "the device pinned another daemon key")
        case .failure:
            metrics.handshakes.labels("malformed").increment()
            metrics.errors(kind: "bad_frame").increment()
            return .close("the first message is no initiation")
        case .success(let (stream, join)):
            guard case .join? = try? SessionMessageCodec.decodeClient(join) else {
                metrics.handshakes.labels("not_a_join").increment()
                return .close("the handshake carries no join")
            }
            metrics.handshakes.labels("accepted").increment()
            return .accepted(stream, join: join)
        }
    }
}
