// One connection to the daemon carrying session messages, sealed (docs/protocol.md 4): a
// `SealedDatagramSession` (UDP: handshake, then ARQ) or a `SealedStreamSession` (TCP). A
// reconnect replaces the link; the ClientSession above it keeps its state.
import InkProtocol

/// What a link reports besides messages.
enum LinkSignal {
    case message([UInt8])
    case unreachable
    case reachable
    case closed(String)
    /// The daemon proved its key; the session is sealed.
    case established
    /// A valid stateless reset: the daemon no longer knows this session (it restarted).
    case reset
    /// The daemon's unauthenticated answer to the handshake.
    case notice(NoticeCode, key: [UInt8])
    /// Unpinned: the key the daemon says it has.
    case learnedKey([UInt8])
}

final class ClientLink {
    /// Stream frames waiting for `pollTransmit`; past this the link is treated as broken (the
    /// caller is not draining its output).
    static let maxQueuedStreamFrames = 65_536

    private let datagram: SealedDatagramSession?
    private let stream: SealedStreamSession?
    private var decoder = StreamFrameDecoder(maxFrameBytes: ClientConfiguration.maxStreamFrameBytes)
    private var signals: [LinkSignal] = []
    private var signalStart = 0
    /// Stream messages sealed and not yet written.
    private var queuedStreamMessages = 0
    private var lastNow: Instant
    private(set) var isClosed = false

    /// `join` is the encoded join message: it rides in the handshake.
    init(_ transport: ClientTransport, join: [UInt8], serverKey: [UInt8]?, crypto: any SessionCrypto,
         configuration: ARQConfiguration, sealing: SealingConfiguration, now: Instant) {
        lastNow = now
        switch transport {
        case .datagram(let id):
            datagram = SealedDatagramSession(deviceConnectionID: id, serverKey: serverKey, join: join, crypto: crypto,
                                             arq: configuration, sealing: sealing, now: now)
            stream = nil
        case .stream:
            stream = SealedStreamSession(serverKey: serverKey, join: join, crypto: crypto, sealing: sealing)
            datagram = nil
        }
    }

    var isDatagram: Bool { datagram != nil }
    var arqStats: ARQStats? { datagram?.arq?.stats }
    var sealedStats: SealedStats? { datagram?.stats }

    /// Queues one message. False when the link cannot take it now (ARQ send queue full): try
    /// again after the next input.
    func send(_ message: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        if let datagram {
            do {
                try datagram.send(message)
                return true
            } catch .sendQueueFull {
                return false
            } catch {
                close(reason: "send failed: \(error)")
                return false
            }
        }
        guard queuedStreamMessages < ClientLink.maxQueuedStreamFrames else { return false }
        stream!.send(message, now: lastNow)
        queuedStreamMessages += 1
        return true
    }

    func handleDatagram(_ bytes: [UInt8], now: Instant) {
        lastNow = now
        guard let datagram, !isClosed else { return }
        datagram.handleDatagram(bytes, now: now)
        drainSealed()
    }

    func handleStreamBytes(_ bytes: [UInt8], now: Instant) {
        lastNow = now
        guard let stream, !isClosed else { return }
        decoder.handleBytes(bytes)
        while true {
            do {
                guard let frame = try decoder.pollFrame() else { break }
                try stream.handleMessage(frame, now: now)
            } catch let error as SealedStreamError {
                drainStream()
                close(reason: "\(error)")
                return
            } catch {
                close(reason: "stream framing: \(error)")
                return
            }
            drainStream()
        }
    }

    func handleTimeout(now: Instant) {
        lastNow = now
        guard let datagram, !isClosed else { return }
        datagram.handleTimeout(now: now)
        drainSealed()
    }

    func pollSignal() -> LinkSignal? {
        guard signalStart < signals.count else { return nil }
        let s = signals[signalStart]
        signalStart += 1
        if signalStart == signals.count {
            signals.removeAll(keepingCapacity: true)
            signalStart = 0
        }
        return s
    }

    func pollTransmit(now: Instant) -> [UInt8]? {
        lastNow = now
        if let datagram {
            let d = datagram.pollTransmit(now: now)
            drainSealed()
            return d?.bytes
        }
        guard let message = stream!.pollMessage() else { return nil }
        queuedStreamMessages = max(0, queuedStreamMessages - 1)
        return StreamFrameDecoder.frame(message)
    }

    func pollTimeout() -> Instant? {
        isClosed ? nil : datagram?.pollTimeout()
    }

    /// Everything sent was acknowledged (always true for streams once drained).
    var isIdle: Bool { datagram?.isIdle ?? (queuedStreamMessages == 0) }

    /// Closes the session (an authenticated close goes out with the next `pollTransmit`).
    func close(reason: String) {
        guard !isClosed else { return }
        isClosed = true
        datagram?.close()
        signals.append(.closed(reason))
    }

    private func drainSealed() {
        guard let datagram else { return }
        while let e = datagram.pollEvent() { handle(e) }
    }

    private func drainStream() {
        guard let stream else { return }
        while let e = stream.pollEvent() { handle(e) }
    }

    private func handle(_ e: SealedEvent) {
        switch e {
        case .delivered(let m): signals.append(.message(m))
        case .peerUnreachable: signals.append(.unreachable)
        case .peerReachable: signals.append(.reachable)
        case .peerClosed:
            isClosed = true
            signals.append(.closed("the daemon closed the session"))
        case .failed(let error):
            isClosed = true
            signals.append(.closed("session failed: \(error)"))
        case .established: signals.append(.established)
        case .reset:
            isClosed = true
            signals.append(.reset)
        case .notice(let code, let key): signals.append(.notice(code, key: key))
        case .learnedKey(let key): signals.append(.learnedKey(key))
        case .confirmed, .moved: break
        }
    }
}
