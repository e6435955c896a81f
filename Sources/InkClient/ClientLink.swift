// One connection to the daemon carrying session messages: an ARQ session (UDP) or a framed
// stream (TCP). A reconnect replaces the link; the ClientSession above it keeps its state.
import InkProtocol

/// What a link reports besides messages.
enum LinkSignal {
    case message([UInt8])
    case unreachable
    case reachable
    case closed(String)
}

final class ClientLink {
    /// Stream frames waiting for `pollTransmit`; past this the link is treated as broken (the
    /// caller is not draining its output).
    static let maxQueuedStreamFrames = 65_536

    private let arq: ARQSession?
    private var decoder = StreamFrameDecoder(maxFrameBytes: ClientConfiguration.maxStreamFrameBytes)
    private var outgoing: [[UInt8]] = []
    private var outgoingStart = 0
    private var signals: [LinkSignal] = []
    private(set) var isClosed = false

    init(_ transport: ClientTransport, configuration: ARQConfiguration, now: Instant) {
        switch transport {
        case .datagram(let id): arq = ARQSession(connectionID: id, configuration: configuration, now: now)
        case .stream: arq = nil
        }
    }

    var isDatagram: Bool { arq != nil }
    var arqStats: ARQStats? { arq?.stats }

    /// Queues one message. False when the link cannot take it now (ARQ send queue full): try
    /// again after the next input.
    func send(_ message: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        if let arq {
            do {
                try arq.send(message)
                return true
            } catch .sendQueueFull {
                return false
            } catch {
                close(reason: "send failed: \(error)")
                return false
            }
        }
        guard outgoing.count - outgoingStart < ClientLink.maxQueuedStreamFrames else { return false }
        outgoing.append(StreamFrameDecoder.frame(message))
        return true
    }

    func handleDatagram(_ bytes: [UInt8], now: Instant) {
        guard let arq, !isClosed else { return }
        arq.handleDatagram(bytes, now: now)
        drainARQ()
    }

    func handleStreamBytes(_ bytes: [UInt8]) {
        guard arq == nil, !isClosed else { return }
        decoder.handleBytes(bytes)
        while true {
            do {
                guard let frame = try decoder.pollFrame() else { break }
                signals.append(.message(frame))
            } catch {
                close(reason: "stream framing: \(error)")
                return
            }
        }
    }

    func handleTimeout(now: Instant) {
        guard let arq, !isClosed else { return }
        arq.handleTimeout(now: now)
        drainARQ()
    }

    func pollSignal() -> LinkSignal? {
        signals.isEmpty ? nil : signals.removeFirst()
    }

    func pollTransmit(now: Instant) -> [UInt8]? {
        if let arq {
            let d = arq.pollTransmit(now: now)
            drainARQ()
            return d
        }
        guard outgoingStart < outgoing.count else { return nil }
        let frame = outgoing[outgoingStart]
        outgoingStart += 1
        if outgoingStart == outgoing.count {
            outgoing.removeAll(keepingCapacity: true)
            outgoingStart = 0
        }
        return frame
    }

    func pollTimeout() -> Instant? {
        isClosed ? nil : arq?.pollTimeout()
    }

    /// Everything sent was acknowledged (always true for streams once drained).
    var isIdle: Bool { arq?.isIdle ?? (outgoingStart == outgoing.count) }

    /// Closes the ARQ session (a close frame goes out with the next `pollTransmit`).
    func close(reason: String) {
        guard !isClosed else { return }
        isClosed = true
        arq?.close()
        signals.append(.closed(reason))
    }

    private func drainARQ() {
        guard let arq else { return }
        while let e = arq.pollEvent() {
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
            }
        }
    }
}
