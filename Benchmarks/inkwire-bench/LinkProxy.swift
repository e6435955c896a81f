import Foundation
import InkProtocol
import InkSim
import InkUV

/// `inkwire-bench link ...`: a UDP impairment proxy (no root needed). Clients send to `--listen`;
/// each client source address gets its own upstream socket towards `--forward`, so the server's
/// replies find their way back. Both directions are impaired by their own `LinkImpairment`, seeded
/// from `--seed`, so a run's drop and delay decisions replay exactly. On SIGINT, SIGTERM or after
/// `--duration` it prints one JSON line of counters and a table.
func runLinkProxy(_ arguments: [String]) -> Never {
    let options: LinkProxyOptions
    do {
        options = try LinkProxyOptions(arguments)
    } catch {
        FileHandle.standardError.write(Data("inkwire-bench link: \(error)\n\(LinkProxyOptions.usage)\n".utf8))
        exit(64)
    }
    do {
        let proxy = try LinkProxy(options: options)
        FileHandle.standardError.write(Data("inkwire-bench link: \(try proxy.listenAddress) -> \(options.forward), seed \(options.seed)\n".utf8))
        proxy.run()
        print(proxy.reportJSON())
        print("")
        print(proxy.reportTable())
        proxy.shutdown()
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("inkwire-bench link: \(error)\n".utf8))
        exit(1)
    }
}

/// What one direction did, for the report.
struct LinkDirectionCounters {
    var received = 0
    /// Bytes of the datagrams received (UDP payload, before any impairment).
    var receivedBytes = 0
    /// Copies sent on (duplicates included).
    var forwarded = 0
    var dropped = 0
    var oversize = 0
    var duplicated = 0
    var reordered = 0
    /// Refused because `LinkProxy.maximumHeldDatagrams` were already waiting.
    var queueFull = 0
    /// Refused by the socket (kernel error or its send-queue bound).
    var sendFailed = 0

    var json: String {
        "{\"received\":\(received),\"forwarded\":\(forwarded),\"dropped\":\(dropped),\"oversize\":\(oversize),"
            + "\"duplicated\":\(duplicated),\"reordered\":\(reordered),\"queue_full\":\(queueFull),\"send_failed\":\(sendFailed),\"received_bytes\":\(receivedBytes)}"
    }
}

final class LinkProxy {
    /// Distinct client source addresses served (one socket each, so also bounded by the file
    /// limit); datagrams from further ones are refused and counted.
    static let maximumSessions = 8192
    /// Datagrams an upstream socket reads per system call: each slice is a 64 KiB slab, so
    /// thousands of sessions stay small while the shared listener keeps the full batch.
    static let upstreamReceiveBatch = 4
    /// Datagrams (both directions) waiting for their due time; more are refused (tail drop).
    static let maximumHeldDatagrams = 20_000
    /// Receive and send buffer asked of the kernel for every proxy socket (capped by
    /// net.core.rmem_max / wmem_max). The default (about 200 KB) overflowed on a daemon's burst
    /// of a full send window whenever the proxy was descheduled: 100-600 datagrams lost per
    /// 1M-point sync at 0 % configured loss, loss nobody asked for. inkwired asks the same.
    static let socketBufferBytes: Int32 = 8 << 20

    private enum Direction { case toServer, toClient }

    /// A datagram waiting for its due time, and the socket and peer it leaves through.
    private struct Held {
        var due: UInt64
        var bytes: [UInt8]
        var socket: UDPSocket
        var peer: SocketAddress
        var direction: Direction
    }

    private let options: LinkProxyOptions
    private let loop: EventLoop
    private let listener: UDPSocket
    private let timer: LoopTimer
    private var stopTimer: LoopTimer?
    private var signals: [Signal] = []
    /// Upstream socket of each client (looked up only; output never depends on its order).
    private var sessions: [SocketAddress: UDPSocket] = [:]
    private(set) var sessionsRefused = 0
    private var toServer: LinkImpairment
    private var toClient: LinkImpairment
    private(set) var toServerCounters = LinkDirectionCounters()
    private(set) var toClientCounters = LinkDirectionCounters()
    /// Sorted by due time, latest first, so the next datagram out is `last`; equal due times
    /// leave in arrival order.
    private var held: [Held] = []
    private var armedFor: UInt64?
    private let startedAt: UInt64
    private var stoppedAt: UInt64?

    /// Opens the listener on `sharedLoop` (a new loop by default). `watchesSignals` makes SIGINT and
    /// SIGTERM stop the loop (tests, sharing the loop with their own sockets, leave it off).
    init(options: LinkProxyOptions, sharing sharedLoop: EventLoop? = nil, watchesSignals: Bool = true) throws {
        self.options = options
        self.loop = try sharedLoop ?? EventLoop()
        listener = try UDPSocket(loop: loop, bindTo: options.listen)
        try? listener.setReceiveBufferSize(LinkProxy.socketBufferBytes)
        try? listener.setSendBufferSize(LinkProxy.socketBufferBytes)
        timer = try LoopTimer(loop: loop)
        // Each direction draws from its own stream, both derived from the one seed.
        var root = SimRandom(seed: options.seed)
        toServer = LinkImpairment(configuration: options.link, seed: root.next())
        toClient = LinkImpairment(configuration: options.link, seed: root.next())
        startedAt = loop.now
        try listener.startReceiving { [unowned self] bytes, client in self.fromClient(bytes, client) }
        for signal in watchesSignals ? [Signal.interrupt, Signal.terminate] : [] {
            let watcher = try Signal(loop: loop)
            try watcher.start(signal) { [unowned self] _ in self.stop() }
            signals.append(watcher)
        }
        if let seconds = options.durationSeconds {
            let stopTimer = try LoopTimer(loop: loop)
            stopTimer.start(afterMicroseconds: UInt64(seconds * 1_000_000)) { [unowned self] in self.stop() }
            self.stopTimer = stopTimer
        }
    }

    var listenAddress: SocketAddress { get throws { try listener.localAddress } }

    func run() { _ = loop.run() }

    func stop() {
        if stoppedAt == nil { stoppedAt = loop.now }
        loop.stop()
    }

    func shutdown() { loop.shutdown() }

    private func fromClient(_ bytes: UnsafeRawBufferPointer, _ client: SocketAddress) {
        toServerCounters.received += 1
        toServerCounters.receivedBytes += bytes.count
        let upstream: UDPSocket
        if let existing = sessions[client] {
            upstream = existing
        } else {
            guard sessions.count < LinkProxy.maximumSessions, let created = openUpstream(for: client) else {
                sessionsRefused += 1
                return
            }
            upstream = created
        }
        let decision = toServer.decide(size: bytes.count, now: Instant(microseconds: loop.now))
        admit(decision, bytes, via: upstream, to: options.forward, .toServer)
    }

    private func openUpstream(for client: SocketAddress) -> UDPSocket? {
        let local: SocketAddress = options.forward.family == .ipv4 ? .anyIPv4(port: 0) : .anyIPv6(port: 0)
        guard let upstream = try? UDPSocket(loop: loop, bindTo: local, batch: LinkProxy.upstreamReceiveBatch) else { return nil }
        try? upstream.setReceiveBufferSize(LinkProxy.socketBufferBytes)
        try? upstream.setSendBufferSize(LinkProxy.socketBufferBytes)
        do {
            try upstream.startReceiving { [unowned self] bytes, _ in self.fromServer(bytes, to: client) }
        } catch {
            upstream.close()
            return nil
        }
        sessions[client] = upstream
        return upstream
    }

    private func fromServer(_ bytes: UnsafeRawBufferPointer, to client: SocketAddress) {
        toClientCounters.received += 1
        toClientCounters.receivedBytes += bytes.count
        let decision = toClient.decide(size: bytes.count, now: Instant(microseconds: loop.now))
        admit(decision, bytes, via: listener, to: client, .toClient)
    }

    private func admit(_ decision: ImpairmentDecision, _ bytes: UnsafeRawBufferPointer, via socket: UDPSocket,
                       to peer: SocketAddress, _ direction: Direction) {
        func count(_ change: (inout LinkDirectionCounters) -> Void) {
            switch direction {
            case .toServer: change(&toServerCounters)
            case .toClient: change(&toClientCounters)
            }
        }
        switch decision {
        case .lost:
            count { $0.dropped += 1 }
        case .oversize:
            count { $0.oversize += 1 }
        case .deliver(let due, let duplicateDue, let reordered):
            if reordered { count { $0.reordered += 1 } }
            let copy = [UInt8](bytes)
            for (copyIndex, time) in [due, duplicateDue].compactMap({ $0 }).enumerated() {
                guard held.count < LinkProxy.maximumHeldDatagrams else {
                    count { $0.queueFull += 1 }
                    continue
                }
                if copyIndex == 1 { count { $0.duplicated += 1 } }
                hold(Held(due: time.microseconds, bytes: copy, socket: socket, peer: peer, direction: direction))
            }
        }
    }

    private func hold(_ datagram: Held) {
        // Already due and nothing earlier waiting: send now rather than lose up to a millisecond
        // to the timer's whole-millisecond rounding.
        if held.isEmpty && datagram.due <= loop.now {
            transmit(datagram)
            return
        }
        // First index whose due time is not later than the new one: the new one goes before it.
        var low = 0, high = held.count
        while low < high {
            let middle = (low + high) / 2
            if held[middle].due > datagram.due { low = middle + 1 } else { high = middle }
        }
        held.insert(datagram, at: low)
        armTimer()
    }

    private func armTimer() {
        guard let next = held.last?.due else { return }
        if let armed = armedFor, armed <= next { return }
        armedFor = next
        timer.start(atMicroseconds: next) { [unowned self] in
            self.armedFor = nil
            self.releaseDue()
        }
    }

    private func releaseDue() {
        let now = loop.now
        while let next = held.last, next.due <= now {
            held.removeLast()
            transmit(next)
        }
        armTimer()
    }

    private func transmit(_ datagram: Held) {
        let sent = (try? datagram.socket.send(datagram.bytes, to: datagram.peer)) != nil
        switch (datagram.direction, sent) {
        case (.toServer, true): toServerCounters.forwarded += 1
        case (.toServer, false): toServerCounters.sendFailed += 1
        case (.toClient, true): toClientCounters.forwarded += 1
        case (.toClient, false): toClientCounters.sendFailed += 1
        }
    }

    // MARK: report

    private var elapsedSeconds: Double { Double((stoppedAt ?? loop.now) - startedAt) / 1_000_000 }

    func reportJSON() -> String {
        let l = options.link
        let loss: String
        switch l.loss {
        case .none: loss = "\"none\""
        case .bernoulli(let p): loss = "\"bernoulli:\(p * 100)\""
        case .gilbertElliott(let g):
            loss = "\"gilbert-elliott:\(g.goodToBad * 100),\(g.badToGood * 100),\(g.lossWhenGood * 100),\(g.lossWhenBad * 100)\""
        }
        let fields: [(String, String)] = [
            ("bench", "\"link\""), ("seed", "\(options.seed)"), ("loss_model", loss),
            ("delay_ms", "\(Double(l.delay.microseconds) / 1000)"), ("jitter_ms", "\(Double(l.jitter.microseconds) / 1000)"),
            ("reorder_percent", "\(l.reorderChance * 100)"), ("duplicate_percent", "\(l.duplicateChance * 100)"),
            ("rate_kbps", "\((l.bytesPerSecond ?? 0) * 8 / 1000)"), ("elapsed_s", "\(elapsedSeconds)"),
            ("sessions", "\(sessions.count)"), ("sessions_refused", "\(sessionsRefused)"), ("still_held", "\(held.count)"),
            ("client_to_server", toServerCounters.json), ("server_to_client", toClientCounters.json),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    func reportTable() -> String {
        let header = ["direction", "received", "forwarded", "dropped", "duplicated", "reordered", "queue full", "send failed", "oversize"]
        func row(_ name: String, _ c: LinkDirectionCounters) -> String {
            "| " + [name, "\(c.received)", "\(c.forwarded)", "\(c.dropped)", "\(c.duplicated)", "\(c.reordered)",
                    "\(c.queueFull)", "\(c.sendFailed)", "\(c.oversize)"].joined(separator: " | ") + " |"
        }
        return (["| " + header.joined(separator: " | ") + " |", "|" + String(repeating: " --- |", count: header.count),
                 row("client -> server", toServerCounters), row("server -> client", toClientCounters)]).joined(separator: "\n")
    }
}
