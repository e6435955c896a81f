import InkClient
import InkCodec
import InkUV

/// Where one loss run's members send, and the bytes that crossed the impaired link.
protocol LossBenchLink: AnyObject {
    /// "proxy", "netns" or "unimpaired", as reported.
    var name: String { get }
    /// Bytes that entered the link in either direction (IP and UDP/TCP headers included).
    var wireBytes: Int { get }
    /// Packets the kernel dropped before the link's model saw them (loss nobody asked for).
    var deviceDrops: Int { get }
}

extension LossBenchLink {
    var deviceDrops: Int { 0 }
}

/// The in-process UDP impairment proxy (`LinkProxy`) on the run's loop: loss per direction,
/// RTT / 2 delay each way, seeded.
final class LossProxyLink: LossBenchLink {
    /// IPv4 + UDP header bytes added to each datagram's payload, so proxy byte counts compare
    /// with the packet-level link's.
    static let headerBytesPerDatagram = 28

    let proxy: LinkProxy
    var name: String { "proxy" }

    init(loop: EventLoop, forward: SocketAddress, lossPercent: Double, rttMilliseconds: Int, seed: UInt64) throws {
        let options = try LinkProxyOptions([
            "--listen", "127.0.0.1:0", "--forward", "\(forward)", "--loss-percent", "\(lossPercent)",
            "--delay-ms", "\(Double(rttMilliseconds) / 2)", "--seed", "\(seed)",
        ])
        proxy = try LinkProxy(options: options, sharing: loop, watchesSignals: false)
    }

    var listenAddress: SocketAddress { get throws { try proxy.listenAddress } }

    var wireBytes: Int {
        let up = proxy.toServerCounters, down = proxy.toClientCounters
        return up.receivedBytes + down.receivedBytes + (up.received + down.received) * LossProxyLink.headerBytesPerDatagram
    }
}

/// No impairment at all (a transport the chosen link cannot impair); bytes are not counted.
final class LossUnimpairedLink: LossBenchLink {
    var name: String { "unimpaired" }
    var wireBytes: Int { 0 }
}

/// One transport at one loss level: starts the relay process and the link, joins every member
/// through it, plays each room's trace slice from its drawer, and records every delivery until
/// all watchers have everything (or the drain timeout, or SIGINT).
struct LossScenario {
    /// How often the run checks for completion, timeouts and SIGINT.
    static let superviseIntervalMicroseconds: UInt64 = 20_000
    /// Longest wait for every member to join.
    static let joinTimeoutMicroseconds: UInt64 = 60_000_000
    /// Pause between the last join and the first batch, so join traffic has settled.
    static let settleMicroseconds: UInt64 = 200_000
    /// How often a progress line goes to stderr during a run.
    static let progressIntervalMicroseconds: UInt64 = 5_000_000

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    var transport: LossTransport
    var lossPercent: Double
    var options: LossBenchOptions
    var linkMode: LossLinkMode
    var trace: [TraceLine]
    var binDirectory: String
    var progress: (String) -> Void = { _ in }

    func run() throws -> LossRunResult {
        var result = LossRunResult(transport: transport.rawValue, lossPercent: lossPercent, rttMilliseconds: options.rttMilliseconds,
                                   rooms: options.rooms, members: options.members, seed: options.seed, link: "?",
                                   durationSeconds: options.durationSeconds)
        var netns: LossNetnsLink?
        defer { netns?.stop() }
        if linkMode == .netns {
            netns = try LossNetnsLink(lossPercent: lossPercent, rttMilliseconds: options.rttMilliseconds, seed: options.seed,
                                      tcpCongestionControl: options.tcpCongestionControl,
                                      talliedServerPorts: transport.kcptun != nil ? [LossKCPTunnels.legacyServerPort] : [])
        }
        // A kcptun row also has one legacy app watching room 0 through its own tunnel.
        let legacyRoom = transport.kcptun != nil ? LossScenario.roomName(0) : nil
        let server = try LossBenchServer(transport == .enet ? .enetRelay : .inkwired, binDirectory: binDirectory,
                                         host: netns?.serverHost ?? "127.0.0.1", launcher: netns?.serverLauncher ?? [],
                                         tcpRetransmitCeilingMs: options.tcpRetransmitCeilingMs, legacyRoom: legacyRoom)
        defer { server.stop() }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        guard let serverAddress = transport.isDatagram ? server.udp : server.tcp else {
            throw Failure(description: "the relay reported no address for \(transport.rawValue)")
        }

        // kcptun: a server per relay port in the server namespace, a client per member (and one
        // for the legacy app) in the client namespace; members connect to their client.
        var tunnels: LossKCPTunnels?
        defer { tunnels?.stop() }
        var memberTargets: [SocketAddress] = []
        var legacyTarget: SocketAddress?
        if let profile = transport.kcptun {
            guard let netns, let legacyAddress = server.legacy else {
                throw Failure(description: "\(transport.rawValue) needs the packet-level link (--link netns)")
            }
            let started = try LossKCPTunnels(profile: profile, serverLauncher: netns.serverLauncher, clientLauncher: netns.clientLauncher)
            tunnels = started
            (memberTargets, legacyTarget) = try started.startForRelay(native: serverAddress, legacy: legacyAddress,
                                                                      members: options.rooms * options.members)
        }

        let link: LossBenchLink
        var target = serverAddress
        if let netns {
            link = netns
        } else if linkMode == .proxy && transport.isProxyImpairable {
            let proxy = try LossProxyLink(loop: loop, forward: serverAddress, lossPercent: lossPercent,
                                          rttMilliseconds: options.rttMilliseconds, seed: options.seed)
            target = try proxy.listenAddress
            link = proxy
        } else {
            link = LossUnimpairedLink()
        }
        result.link = link.name
        if netns != nil { result.tcpCongestionControl = options.tcpCongestionControl ?? lossBenchHostTCPCongestionControl() }
        if transport == .inkwireTCP { result.tcpRetransmitCeilingMs = Int(options.tcpRetransmitCeilingMs) }

        // Members: the first of each room draws, the others watch (their sockets are opened in
        // the client namespace with the packet-level link).
        var closers: [LossMember] = []
        defer { closers.forEach { $0.close() } }
        func makeMembers() throws -> [[LossMember]] {
            var rooms: [[LossMember]] = []
            for room in 0..<options.rooms {
                var members: [LossMember] = []
                for index in 0..<options.members {
                    let member: LossMember
                    switch transport {
                    case .enet:
                        member = try ENetLossMember(loop: loop, server: target, room: LossScenario.roomName(room)) { _ = loop.runNoWait() }
                    case .inkwireUDP, .inkwireTCP, .kcptunFast3, .kcptunFast2, .kcptunFast3NoFEC, .kcptunFast2NoFEC:
                        var configuration = ClientConfiguration(room: LossScenario.roomName(room), user: "member-\(index)",
                                                                role: index == 0 ? .teacher : .viewer,
                                                                origin: UInt64(room) << 16 | UInt64(index + 1), serverKey: server.publicKey)
                        configuration.initialHave = .nothing
                        let tunnelled = memberTargets.isEmpty ? target : memberTargets[room * options.members + index]
                        member = try InkwireLossMember(loop: loop, server: tunnelled, datagram: transport.isDatagram,
                                                       configuration: configuration, tcpRetransmitCeilingMs: options.tcpRetransmitCeilingMs)
                    }
                    members.append(member)
                    closers.append(member)
                }
                rooms.append(members)
            }
            return rooms
        }
        let joinStart = loop.now
        let rooms = try netns.map { try $0.inClientNamespace(makeMembers) } ?? makeMembers()
        let ticker = try LoopTimer(loop: loop)
        defer { ticker.close() }
        ticker.start(afterMicroseconds: LossScenario.superviseIntervalMicroseconds,
                     repeatingEveryMicroseconds: LossScenario.superviseIntervalMicroseconds) {}
        let joinDeadline = loop.now + LossScenario.joinTimeoutMicroseconds
        while !rooms.allSatisfy({ $0.allSatisfy { $0.isJoined } }) {
            if lossBenchStopRequested != 0 { throw Failure(description: "interrupted while members joined") }
            if loop.now > joinDeadline {
                let failures = rooms.joined().compactMap { $0.failure }
                throw Failure(description: "members did not all join within \(LossScenario.joinTimeoutMicroseconds / 1_000_000) s"
                              + (failures.first.map { ": \($0)" } ?? ""))
            }
            _ = loop.runOnce()
        }
        // The legacy app joins last, so room 0's drawer hears of it (inkwired joins an app
        // as soon as its stream is open; the app itself is told nothing).
        var legacyWatcher: LegacyLossWatcher?
        defer { legacyWatcher?.close() }
        if let legacyTarget {
            let watcher = try netns.map { try $0.inClientNamespace { try LegacyLossWatcher(loop: loop, server: legacyTarget) } }
                ?? LegacyLossWatcher(loop: loop, server: legacyTarget)
            legacyWatcher = watcher
            let drawer = rooms[0][0] as? InkwireLossMember
            while !(watcher.isConnected && (drawer?.presentUsers.contains { $0.hasPrefix("legacy-") } ?? true)) {
                if lossBenchStopRequested != 0 { throw Failure(description: "interrupted while the legacy app joined") }
                if loop.now > joinDeadline || watcher.failure != nil {
                    throw Failure(description: "the legacy app did not join within \(LossScenario.joinTimeoutMicroseconds / 1_000_000) s"
                                  + (watcher.failure.map { ": \($0)" } ?? ""))
                }
                _ = loop.runOnce()
            }
        }
        result.joinSeconds = Double(loop.now - joinStart) / 1_000_000

        // Plans: room r plays the trace from r x duration on (wrapping), for duration.
        let durationMs = UInt64(options.durationSeconds * 1000)
        let traceEndMs = (trace.last?.timeMs ?? 0) + 1
        var plans: [LossRoomPlan] = []
        for (index, members) in rooms.enumerated() {
            guard let author = members[0].author else { throw Failure(description: "the drawer of room \(index) has no author id") }
            var offsetMs = traceEndMs > durationMs ? (UInt64(index) * durationMs) % (traceEndMs - durationMs) : 0
            var plan = LossRoomPlan(trace: trace, offsetMs: offsetMs, durationMs: durationMs, author: author)
            if plan.commands.isEmpty {
                offsetMs = 0
                plan = LossRoomPlan(trace: trace, offsetMs: offsetMs, durationMs: durationMs, author: author)
            }
            plans.append(plan)
        }
        let recorder = LossRecorder(plans: plans)
        for (index, members) in rooms.enumerated() {
            for watcher in members.dropFirst() {
                let slot = recorder.addWatcher(room: index)
                watcher.onDelivered = { commands, at in recorder.delivered(commands, to: slot, at: at) }
            }
        }

        if let legacyWatcher {
            let slot = recorder.addLegacyWatcher(room: 0)
            legacyWatcher.onMessages = { messages, at in recorder.legacyDelivered(messages, to: slot, at: at) }
        }

        // Play: each room starts a fraction of a batch window after the previous one.
        let cpuAtStart = server.cpuSeconds
        let tunnelCountersAtStart = tunnels?.counters() ?? [:]
        let tunnelServerCPUAtStart = tunnels?.serverCPUSeconds ?? 0
        let tunnelClientCPUAtStart = tunnels?.clientCPUSeconds ?? 0
        let bytesAtStart = link.wireBytes
        let legacyBytesAtStart = netns?.talliedBytes ?? 0
        let firstStart = loop.now + LossScenario.settleMicroseconds
        var drawerTimers: [LoopTimer] = []
        defer { drawerTimers.forEach { $0.close() } }
        var nextBatch = Array(repeating: 0, count: rooms.count)
        var lastDue: UInt64 = firstStart
        for (index, plan) in plans.enumerated() {
            let start = firstStart + UInt64(index) * Batch.liveFlushMs * 1000 / UInt64(rooms.count)
            recorder.roomStart[index] = start
            lastDue = max(lastDue, start + (plan.dueMicroseconds.last ?? 0))
            let timer = try LoopTimer(loop: loop)
            drawerTimers.append(timer)
            let drawer = rooms[index][0]
            func fire() {
                while nextBatch[index] < plan.batches.count, start + plan.dueMicroseconds[nextBatch[index]] <= loop.now {
                    let batch = plan.batches[nextBatch[index]]
                    drawer.send(batch)
                    recorder.sentCommands[index] += batch.count
                    nextBatch[index] += 1
                }
                if nextBatch[index] < plan.batches.count {
                    timer.start(atMicroseconds: start + plan.dueMicroseconds[nextBatch[index]]) { fire() }
                }
            }
            if !plan.batches.isEmpty { timer.start(atMicroseconds: start + plan.dueMicroseconds[0]) { fire() } }
        }
        let drainDeadline = lastDue + UInt64(options.drainTimeoutSeconds * 1_000_000)
        var nextProgress = loop.now + LossScenario.progressIntervalMicroseconds
        let label = "\(transport.rawValue) \(lossPercent)%"
        ticker.start(afterMicroseconds: LossScenario.superviseIntervalMicroseconds,
                     repeatingEveryMicroseconds: LossScenario.superviseIntervalMicroseconds) {
            let now = loop.now
            let allSent = zip(nextBatch, plans).allSatisfy { $0 == $1.batches.count }
            if lossBenchStopRequested != 0 {
                result.interrupted = true
                loop.stop()
            } else if allSent && recorder.isComplete {
                loop.stop()
            } else if now > drainDeadline {
                result.note = "drain timed out after \(options.drainTimeoutSeconds) s"
                loop.stop()
            } else if now >= nextProgress {
                nextProgress = now + LossScenario.progressIntervalMicroseconds
                let played = Double(min(now, lastDue) - min(now, firstStart)) / 1_000_000
                progress("\(label): \(String(format1: played)) / \(String(format1: Double(lastDue - firstStart) / 1_000_000)) s played, "
                         + "\(recorder.inOrder) of \(recorder.expected) deliveries")
            }
        }
        _ = loop.run()

        result.commandsSent = recorder.sentCommands.reduce(0, +)
        result.expected = recorder.expected
        result.delivered = recorder.inOrder
        result.violations = recorder.violations
        result.latencies = recorder.latencies.sorted()
        result.pointsDelivered = recorder.pointsDelivered
        result.wireBytes = link.wireBytes - bytesAtStart
        if legacyWatcher != nil, let netns {
            // The legacy app's tunnel is reported on its own, so the row's bytes per point
            // compare with the rows that have none.
            result.legacyWireBytes = netns.talliedBytes - legacyBytesAtStart
            result.wireBytes -= result.legacyWireBytes
        }
        result.linkDeviceDrops = link.deviceDrops
        result.daemonCPUSeconds = server.cpuSeconds - cpuAtStart
        result.daemonRSSMegabytes = server.peakRSSMegabytes
        if let tunnels {
            let serverCPU = tunnels.serverCPUSeconds - tunnelServerCPUAtStart
            result.tunnelServerCPUSeconds = serverCPU
            result.tunnelClientCPUSeconds = tunnels.clientCPUSeconds - tunnelClientCPUAtStart
            let counters = tunnels.counters()
            if !counters.isEmpty && !tunnelCountersAtStart.isEmpty {
                result.tunnelCounters = LossRunResult.tunnelCounterNames.map { ($0, counters[$0, default: 0] - tunnelCountersAtStart[$0, default: 0]) }
            }
            result.tunnelServers = tunnels.serverCount
            result.tunnelClients = tunnels.clientCount
            result.daemonCPUSeconds += serverCPU
            result.daemonRSSMegabytes += tunnels.serverPeakRSSMegabytes
        }
        if legacyWatcher != nil {
            result.legacyWatchers = recorder.legacyWatchers.count
            result.legacyExpected = recorder.legacyExpected
            result.legacyDelivered = recorder.legacyInOrder
            result.legacyViolations = recorder.legacyViolations
            result.legacyLatencies = recorder.legacyLatencies.sorted()
        }
        if let failure = rooms.joined().compactMap({ $0.failure }).first {
            result.note = [result.note, "member: \(failure)"].compactMap { $0 }.joined(separator: "; ")
        }
        if let failure = legacyWatcher?.failure {
            result.note = [result.note, "legacy app: \(failure)"].compactMap { $0 }.joined(separator: "; ")
        }
        return result
    }
}

extension LossScenario {
    /// Room `index`'s name at the relay.
    static func roomName(_ index: Int) -> String { "room-\(index)" }
}

extension String {
    /// One decimal place, without Foundation.
    init(format1 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(abs(tenths % 10))"
    }
}
