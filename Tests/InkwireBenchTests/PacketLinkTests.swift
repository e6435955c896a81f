import Foundation
import Glibc
import InkProtocol
import InkSim
import Testing
@testable import inkwire_bench

/// The packet link needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN (a container's root may lack
/// them), a TUN driver and iproute2; elsewhere these tests return at once.
var packetLinkAvailable: Bool {
    guard getuid() == 0, access("/dev/net/tun", R_OK | W_OK) == 0, IPCommand.path != nil, SystemCalls.setns != nil,
          let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
          let effective = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
    else { return false }
    let netAdmin: UInt64 = 1 << 12, sysAdmin: UInt64 = 1 << 21
    return effective & netAdmin != 0 && effective & sysAdmin != 0
}

/// Tests use their own prefix, so they never meet the namespaces of a benchmark being run.
private let testPrefix = "inkwtest"

/// Indices of `count` packets a direction lets through, per its `LinkImpairment` stream.
private func delivered(count: Int, configuration: LinkConfiguration, seed: UInt64) -> [Int] {
    var link = LinkImpairment(configuration: configuration, seed: seed)
    return (0..<count).filter { _ in
        if case .deliver = link.decide(size: 92, now: .zero) { return true }
        return false
    }
}

/// UDP datagrams from the client namespace to the server namespace, through 10 % loss and 5 ms
/// delay: exactly those the seed's client-to-server decisions deliver arrive, in order; the
/// counters agree; and stopping removes both namespaces.
@Test func packetLinkDropsExactlyWhatTheSeedDecides() throws {
    guard packetLinkAvailable else { return }
    let seed: UInt64 = 21
    let count = 300
    var configuration = LinkConfiguration.clean(delay: .milliseconds(5))
    configuration.loss = .bernoulli(0.10)
    let link = try PacketLink.start(configuration: configuration, seed: seed, prefix: testPrefix)
    let names = [link.serverNamespace.name, link.clientNamespace.name]
    #expect(names.allSatisfy(NetworkNamespace.exists), "seed \(seed)")

    let receiver = try link.run(in: .server) { try InetSocket.udp(bind: PacketLink.serverAddress) }
    let sender = try link.run(in: .client) { try InetSocket.udp(bind: PacketLink.clientAddress) }
    defer { close(receiver); close(sender) }
    let port = InetSocket.localPort(receiver)

    var root = SimRandom(seed: seed)
    let expected = delivered(count: count, configuration: link.configuration, seed: root.next())
    var received: [Int] = []
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 128)
        while recv(receiver, &buffer, buffer.count, Int32(MSG_DONTWAIT)) >= 2 {
            received.append(Int(buffer[0]) | Int(buffer[1]) << 8)
        }
    }
    for index in 0..<count {
        // 64-byte payload: a 92-byte IP packet, as `delivered` assumes.
        let payload = [UInt8(index & 0xFF), UInt8(index >> 8)] + [UInt8](repeating: 0, count: 62)
        #expect(InetSocket.send(sender, payload, to: PacketLink.serverAddress, port: port))
        usleep(200)
        drain()
    }
    // Everything is due 5 ms after it was sent; the bound only ends a run that went wrong.
    let deadline = monotonicMicroseconds() + 3_000_000
    while received.count < expected.count && monotonicMicroseconds() < deadline {
        usleep(2000)
        drain()
    }
    usleep(20_000)
    drain()

    #expect(received == expected, "seed \(seed)")
    #expect(expected.count > count * 8 / 10 && expected.count < count * 97 / 100, "seed \(seed): \(expected.count) of \(count)")
    let (up, _) = link.counters
    #expect(up.packets == count, "seed \(seed)")
    #expect(up.dropped == count - expected.count, "seed \(seed)")
    #expect(up.forwarded == expected.count, "seed \(seed)")
    #expect(up.bytesForwarded == expected.count * 92, "seed \(seed)")
    #expect(up.ignored == 0, "seed \(seed)")
    #expect(link.deviceDrops.toServer == 0, "seed \(seed)")

    link.stop()
    #expect(!names.contains(where: NetworkNamespace.exists), "seed \(seed)")
}

/// A TCP transfer from client to server through 5 % loss arrives complete and intact (TCP
/// repairs what the link drops), and the link did drop some of its packets.
@Test func packetLinkCarriesTCPThroughLoss() throws {
    guard packetLinkAvailable else { return }
    let seed: UInt64 = 5
    var configuration = LinkConfiguration.clean(delay: .milliseconds(2))
    configuration.loss = .bernoulli(0.05)
    let link = try PacketLink.start(configuration: configuration, seed: seed, prefix: testPrefix)
    defer { link.stop() }
    let listener = try link.run(in: .server) { try InetSocket.tcpListener(bind: PacketLink.serverAddress) }
    let client = try link.run(in: .client) { try InetSocket.tcp() }
    defer { close(listener) }
    InetSocket.setReceiveTimeout(listener, microseconds: 10_000_000)
    let port = InetSocket.localPort(listener)
    let size = 400_000
    let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
    let finished = DispatchSemaphore(value: 0)
    let outcome = Thread.detachNewThreadReturningError {
        defer { close(client); finished.signal() }
        try InetSocket.connect(client, to: PacketLink.serverAddress, port: port)
        var offset = 0
        while offset < payload.count {
            let n = payload[offset...].withUnsafeBytes { Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw InetSocket.Failure("send") }
            offset += n
        }
        shutdown(client, Int32(SHUT_WR))
    }
    let connection = accept(listener, nil, nil)
    #expect(connection >= 0, "seed \(seed)")
    var got: [UInt8] = []
    if connection >= 0 {
        InetSocket.setReceiveTimeout(connection, microseconds: 10_000_000)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = recv(connection, &buffer, buffer.count, 0)
            guard n > 0 else { break }
            got += buffer[0..<n]
        }
        close(connection)
    }
    finished.wait()
    #expect(outcome.error == nil, "seed \(seed)")
    #expect(got == payload, "seed \(seed)")
    #expect(link.counters.toServer.dropped > 0, "seed \(seed)")
}

/// A namespace named after a dead process is removed at start; one of a live process (ours)
/// and one of another shape are left alone.
@Test func packetLinkRemovesOnlyStaleNamespaces() throws {
    guard packetLinkAvailable else { return }
    let prefix = "inkwstale"
    let exited = try ChildProcess.spawn(["/bin/true"], environment: [:], stdout: nil, stderr: nil)
    var status: Int32 = 0
    waitpid(exited, &status, 0)
    let dead = "\(prefix)-\(exited)-1-a"
    let live = "\(prefix)-\(getpid())-999999-b"
    let other = "\(prefix)-other"
    for name in [dead, live, other] { _ = try NetworkNamespace.create(name) }
    defer { for name in [dead, live, other] { NetworkNamespace(name: name).remove() } }
    #expect(NetworkNamespace.removeStale(prefix: prefix) == [dead])
    #expect(!NetworkNamespace.exists(dead))
    #expect(NetworkNamespace.exists(live) && NetworkNamespace.exists(other))
}
