import InkUV
import MQTTChaos

/// A TCP proxy between MQTT clients and a broker that plays an unreliable IM server: each
/// accepted client gets its own upstream connection, and an `MQTTChaosSession` decides what
/// happens to every packet (publishes delayed, duplicated, held in bursts; the rest in order).
/// Decisions are seeded per client identifier and direction, so one seed replays them whatever
/// the order clients connect in. Runs on the caller's loop, from its thread only.
public final class MQTTChaosProxy {
    /// Client connections served at once; more are refused (closed at once) and counted.
    public static let maximumConnections = 1024

    public let configuration: MQTTChaosConfiguration
    public let seed: UInt64
    public let forward: SocketAddress
    public private(set) var connectionsAccepted = 0
    public private(set) var connectionsRefused = 0
    /// Connections closed because a side broke the MQTT framing, or the broker refused.
    public private(set) var framingErrors = 0
    public private(set) var upstreamFailures = 0
    /// Called for every PUBLISH the proxy reads (from either side, any QoS, before chaos) with
    /// the loop time. A tap for timing the broker hop.
    public var onPublishArrival: ((MQTTChaosSession.Side, MQTTPacket, UInt64) -> Void)?

    private let loop: EventLoop
    private let listener: TCPListener
    private let timer: LoopTimer
    private var armedFor: UInt64?
    /// Live connections in accept order (the timer visits them in that order).
    private var pipes: [Pipe] = []
    /// Counters of connections already closed.
    private var retiredToBroker = MQTTChaosCounters()
    private var retiredToClient = MQTTChaosCounters()
    /// Connections seen per client identifier (looked up only).
    private var ordinals: [[UInt8]: Int] = [:]
    private var closed = false

    public init(loop: EventLoop, listen: SocketAddress, forward: SocketAddress, configuration: MQTTChaosConfiguration,
                seed: UInt64) throws(UVError) {
        self.loop = loop
        self.forward = forward
        self.configuration = configuration
        self.seed = seed
        listener = try TCPListener(loop: loop, bindTo: listen)
        timer = try LoopTimer(loop: loop)
        try listener.listen { [unowned self] connection in self.accepted(connection) }
    }

    public var listenAddress: SocketAddress? { listener.localAddress }

    /// Counters of the direction flowing from `side`, over every connection so far.
    public func counters(from side: MQTTChaosSession.Side) -> MQTTChaosCounters {
        pipes.reduce(side == .client ? retiredToBroker : retiredToClient) { $0 + $1.session.counters(from: side) }
    }

    /// Stops listening and closes every connection (held publishes are dropped). Idempotent.
    public func close() {
        guard !closed else { return }
        closed = true
        listener.close()
        timer.close()
        for pipe in pipes { retire(pipe) }
    }

    // MARK: - connections

    private final class Pipe {
        var session: MQTTChaosSession
        let client: TCPConnection
        var broker: TCPConnection?
        var isClosed = false
        var shutdownsDone = 0

        init(session: MQTTChaosSession, client: TCPConnection) {
            self.session = session
            self.client = client
        }

        func connection(to side: MQTTChaosSession.Side) -> TCPConnection? { side == .client ? client : broker }
    }

    private func accepted(_ client: TCPConnection) {
        guard !closed, pipes.count < MQTTChaosProxy.maximumConnections else {
            connectionsRefused += 1
            client.close()
            return
        }
        connectionsAccepted += 1
        let session = MQTTChaosSession(configuration: configuration, runSeed: seed) { [unowned self] identifier in
            let ordinal = ordinals[identifier, default: 0]
            ordinals[identifier] = ordinal + 1
            return ordinal
        }
        let pipe = Pipe(session: session, client: client)
        pipe.session.recordsArrivals = onPublishArrival != nil
        pipes.append(pipe)
        try? client.setNoDelay(true)
        do {
            pipe.broker = try TCPConnection.connect(loop: loop, to: forward) { [unowned self] result in
                switch result {
                case .success(let broker): self.upstreamConnected(pipe, broker)
                case .failure:
                    self.upstreamFailures += 1
                    self.retire(pipe)
                }
            }
        } catch {
            upstreamFailures += 1
            retire(pipe)
        }
    }

    /// Reading starts on both sides only once the broker is reachable, so nothing is buffered.
    private func upstreamConnected(_ pipe: Pipe, _ broker: TCPConnection) {
        guard !pipe.isClosed else { return }
        try? broker.setNoDelay(true)
        for (side, connection) in [(MQTTChaosSession.Side.client, pipe.client), (.broker, broker)] {
            connection.onError = { [unowned self] _ in self.retire(pipe) }
            do {
                try connection.startReading({ [unowned self] bytes in
                    guard !pipe.isClosed else { return }
                    let now = loop.now
                    pipe.session.recordsArrivals = self.onPublishArrival != nil
                    pipe.session.handleBytes(bytes, from: side, now: now)
                    if let tap = self.onPublishArrival {
                        while let arrival = pipe.session.pollArrival() { tap(arrival.side, arrival.packet, now) }
                    }
                    self.flush(pipe)
                }, onEnd: { [unowned self] error in
                    guard !pipe.isClosed else { return }
                    if error != nil { return self.retire(pipe) }
                    pipe.session.handleEndOfStream(from: side, now: loop.now)
                    self.flush(pipe)
                })
            } catch {
                retire(pipe)
                return
            }
        }
    }

    /// Writes what the session released, then re-arms the timer.
    private func flush(_ pipe: Pipe) {
        if pipe.session.framingError != nil {
            framingErrors += 1
            retire(pipe)
            return
        }
        while !pipe.isClosed, let transmit = pipe.session.pollTransmit() {
            switch transmit {
            case .bytes(let bytes, let side):
                guard let connection = pipe.connection(to: side) else { return retire(pipe) }
                do { try connection.write(bytes) } catch { return retire(pipe) }
            case .end(let side):
                pipe.connection(to: side)?.shutdown { [unowned self] error in
                    pipe.shutdownsDone += 1
                    if error != nil || pipe.shutdownsDone == 2 { self.retire(pipe) }
                }
            }
        }
        armTimer()
    }

    private func retire(_ pipe: Pipe) {
        guard !pipe.isClosed else { return }
        pipe.isClosed = true
        pipe.client.close()
        pipe.broker?.close()
        retiredToBroker = retiredToBroker + pipe.session.counters(from: .client)
        retiredToClient = retiredToClient + pipe.session.counters(from: .broker)
        pipes.removeAll { $0 === pipe }
    }

    // MARK: - timer

    private func armTimer() {
        guard !closed, let next = pipes.compactMap({ $0.session.nextDeadline }).min() else { return }
        if let armed = armedFor, armed <= next, timer.isActive { return }
        armedFor = next
        timer.start(atMicroseconds: next) { [unowned self] in
            self.armedFor = nil
            let now = loop.now
            for pipe in pipes where !pipe.isClosed {
                pipe.session.handleTimeout(now: now)
                flush(pipe)
            }
            armTimer()
        }
    }
}
