import Foundation
import Glibc
import InkProtocol
import InkSim

/// `netns-link --probe`: measures a fresh `PacketLink` from sockets opened inside its namespaces.
/// First UDP (client to server, so those datagrams are the direction's first decisions and the
/// received set can be checked against the seed), then round trips (UDP echo, like ping), then a
/// bulk TCP transfer, then a burst of small datagrams for the packet rate. One JSON line per
/// measurement.
struct PacketLinkProbe {
    /// Datagrams of the UDP loss check.
    static let udpDatagrams = 1000
    /// Gap between them (5000 per second keeps every queue short).
    static let udpGapMicroseconds: UInt32 = 200
    static let echoes = 100
    static let echoGapMicroseconds: UInt32 = 10_000
    /// How long the packet-rate step sends.
    static let rateMicroseconds: UInt64 = 1_000_000
    /// Size of each write of the TCP sender.
    static let tcpChunk = 65_536

    let link: PacketLink
    let seconds: Double

    func run() throws -> [String] {
        [try udpLoss(), try roundTrips(), try tcpTransfer(), try packetRate()]
    }

    /// Longest a packet can take through the link plus scheduling slack.
    private var settleMicroseconds: UInt32 {
        let c = link.configuration
        return UInt32(min(c.delay.microseconds + c.jitter.microseconds + c.reorderDelay.microseconds + 300_000, 5_000_000))
    }

    private func udpLoss() throws -> String {
        let receiver = try link.run(in: .server) { try InetSocket.udp(bind: PacketLink.serverAddress) }
        let sender = try link.run(in: .client) { try InetSocket.udp(bind: PacketLink.clientAddress) }
        defer { close(receiver); close(sender) }
        let port = InetSocket.localPort(receiver)
        var received = Set<Int>()
        var copies = 0
        func drain() {
            var buffer = [UInt8](repeating: 0, count: 64)
            while recv(receiver, &buffer, buffer.count, Int32(MSG_DONTWAIT)) >= 4 {
                copies += 1
                received.insert(Int(buffer[0]) | Int(buffer[1]) << 8 | Int(buffer[2]) << 16 | Int(buffer[3]) << 24)
            }
        }
        for index in 0..<PacketLinkProbe.udpDatagrams {
            let payload = withUnsafeBytes(of: UInt32(index).littleEndian) { [UInt8]($0) } + [UInt8](repeating: 0, count: 60)
            _ = InetSocket.send(sender, payload, to: PacketLink.serverAddress, port: port)
            usleep(PacketLinkProbe.udpGapMicroseconds)
            drain()
        }
        usleep(settleMicroseconds)
        drain()
        var root = SimRandom(seed: link.seed)
        var decisions = LinkImpairment(configuration: link.configuration, seed: root.next())
        let expected = Set((0..<PacketLinkProbe.udpDatagrams).filter { _ in
            if case .deliver = decisions.decide(size: 20 + 8 + 64, now: .zero) { return true }
            return false
        })
        let lossPercent = 100 * Double(PacketLinkProbe.udpDatagrams - received.count) / Double(PacketLinkProbe.udpDatagrams)
        return "{\"bench\":\"netns-link\",\"probe\":\"udp-loss\",\"sent\":\(PacketLinkProbe.udpDatagrams),\"received\":\(received.count),"
            + "\"copies\":\(copies),\"expected_by_seed\":\(expected.count),\"same_as_seed\":\(received == expected),"
            + "\"loss_percent\":\(rounded(lossPercent))}"
    }

    private func roundTrips() throws -> String {
        let echo = try link.run(in: .server) { try InetSocket.udp(bind: PacketLink.serverAddress) }
        let pinger = try link.run(in: .client) { try InetSocket.udp(bind: PacketLink.clientAddress) }
        defer { close(echo); close(pinger) }
        let port = InetSocket.localPort(echo)
        var sentAt: [Int: UInt64] = [:]
        var rtts: [Double] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        func service() {
            var peer = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            while true {
                let n = withUnsafeMutablePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(echo, &buffer, buffer.count, Int32(MSG_DONTWAIT), $0, &length) }
                }
                guard n > 0 else { break }
                _ = withUnsafePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(echo, buffer, n, 0, $0, length) }
                }
            }
            while recv(pinger, &buffer, buffer.count, Int32(MSG_DONTWAIT)) >= 4 {
                let index = Int(buffer[0]) | Int(buffer[1]) << 8
                if let start = sentAt.removeValue(forKey: index) { rtts.append(Double(monotonicMicroseconds() - start) / 1000) }
            }
        }
        for index in 0..<PacketLinkProbe.echoes {
            sentAt[index] = monotonicMicroseconds()
            _ = InetSocket.send(pinger, [UInt8(index & 0xFF), UInt8(index >> 8)] + [UInt8](repeating: 0, count: 54),
                                to: PacketLink.serverAddress, port: port)
            // Poll in 100 us steps so the echo answers promptly.
            for _ in 0..<(PacketLinkProbe.echoGapMicroseconds / 100) {
                service()
                usleep(100)
            }
        }
        let settleSteps = settleMicroseconds * 2 / 1000
        for _ in 0..<settleSteps where !sentAt.isEmpty {
            service()
            usleep(1000)
        }
        rtts.sort()
        func at(_ q: Double) -> Double { rtts.isEmpty ? 0 : rtts[min(rtts.count - 1, Int(q * Double(rtts.count)))] }
        return "{\"bench\":\"netns-link\",\"probe\":\"rtt\",\"echoes\":\(PacketLinkProbe.echoes),\"replies\":\(rtts.count),"
            + "\"min_ms\":\(rounded(rtts.first ?? 0)),\"p50_ms\":\(rounded(at(0.5))),\"max_ms\":\(rounded(rtts.last ?? 0)),"
            + "\"expected_ms\":\(rounded(2 * Double(link.configuration.delay.microseconds) / 1000))}"
    }

    private func tcpTransfer() throws -> String {
        let listener = try link.run(in: .server) { try InetSocket.tcpListener(bind: PacketLink.serverAddress) }
        let client = try link.run(in: .client) { try InetSocket.tcp() }
        defer { close(listener) }
        InetSocket.setReceiveTimeout(listener, microseconds: 10_000_000)
        let port = InetSocket.localPort(listener)
        let before = link.counters
        let seconds = self.seconds
        let finished = DispatchSemaphore(value: 0)
        let connectFailure = Thread.detachNewThreadReturningError {
            defer { close(client); finished.signal() }
            try InetSocket.connect(client, to: PacketLink.serverAddress, port: port)
            let chunk = [UInt8](repeating: 0x5A, count: PacketLinkProbe.tcpChunk)
            let end = monotonicMicroseconds() + UInt64(seconds * 1_000_000)
            while monotonicMicroseconds() < end {
                guard chunk.withUnsafeBytes({ Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 else { break }
            }
            shutdown(client, Int32(SHUT_WR))
        }
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { throw InetSocket.Failure("accept") }
        defer { close(connection) }
        InetSocket.setReceiveTimeout(connection, microseconds: Int(seconds * 1_000_000) + 30_000_000)
        var total = 0
        var buffer = [UInt8](repeating: 0, count: PacketLinkProbe.tcpChunk)
        let start = monotonicMicroseconds()
        while true {
            let n = recv(connection, &buffer, buffer.count, 0)
            guard n > 0 else { break }
            total += n
        }
        let elapsed = Double(monotonicMicroseconds() - start) / 1_000_000
        finished.wait()
        if let error = connectFailure.error { throw error }
        let after = link.counters
        let algorithm = (try? link.run(in: .client) { () -> String in
            (try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_congestion_control", encoding: .utf8)) ?? "?"
        })?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
        let megabits = Double(total) * 8 / elapsed / 1_000_000
        return "{\"bench\":\"netns-link\",\"probe\":\"tcp\",\"tcp_cc\":\"\(algorithm)\",\"seconds\":\(rounded(elapsed)),\"bytes\":\(total),\"mbit_s\":\(rounded(megabits)),"
            + "\"packets_to_server\":\(after.toServer.packets - before.toServer.packets),"
            + "\"dropped_to_server\":\(after.toServer.dropped - before.toServer.dropped),"
            + "\"packets_to_client\":\(after.toClient.packets - before.toClient.packets),"
            + "\"dropped_to_client\":\(after.toClient.dropped - before.toClient.dropped)}"
    }

    /// Small datagrams from the client as fast as one thread sends them, for a second: the
    /// forwarder's packet rate (what it forwarded per second) and what the kernel dropped before
    /// the forwarder read it.
    private func packetRate() throws -> String {
        let receiver = try link.run(in: .server) { try InetSocket.udp(bind: PacketLink.serverAddress) }
        let sender = try link.run(in: .client) { try InetSocket.udp(bind: PacketLink.clientAddress) }
        defer { close(receiver); close(sender) }
        let port = InetSocket.localPort(receiver)
        let before = link.counters.toServer
        let dropsBefore = link.deviceDrops.toServer
        let payload = [UInt8](repeating: 7, count: 64)
        var sent = 0
        var buffer = [UInt8](repeating: 0, count: 128)
        let start = monotonicMicroseconds()
        while monotonicMicroseconds() - start < PacketLinkProbe.rateMicroseconds {
            if InetSocket.send(sender, payload, to: PacketLink.serverAddress, port: port) { sent += 1 }
            while recv(receiver, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
        }
        let elapsed = Double(monotonicMicroseconds() - start) / 1_000_000
        usleep(settleMicroseconds)
        let after = link.counters.toServer
        let forwarded = after.forwarded - before.forwarded
        return "{\"bench\":\"netns-link\",\"probe\":\"packet-rate\",\"sent\":\(sent),\"forwarded\":\(forwarded),"
            + "\"dropped_by_model\":\(after.dropped - before.dropped),\"device_dropped\":\(link.deviceDrops.toServer - dropsBefore),"
            + "\"forwarded_per_s\":\(Int(Double(forwarded) / elapsed))}"
    }

    private func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}

func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}

/// The error a detached thread ended with, readable once the thread has signalled.
final class ThreadOutcome: @unchecked Sendable {
    var error: (any Error)?
}

extension Thread {
    /// Starts `body` on a new thread; the returned outcome holds its error once it finished.
    static func detachNewThreadReturningError(_ body: @escaping @Sendable () throws -> Void) -> ThreadOutcome {
        let outcome = ThreadOutcome()
        Thread.detachNewThread {
            do { try body() } catch { outcome.error = error }
        }
        return outcome
    }
}
