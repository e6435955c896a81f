import Glibc
import InkUV
import Testing
@testable import InkDaemon

/// `--legacy HOST:PORT=ROOM@CIDR,...`: a legacy listener admits only devices from its networks
/// (legacy apps cannot encrypt or prove who they are), with real sockets on loopback.
@Suite struct LegacyNetworkTests {
    @Test func listenersAdmitTheirNetworksAndRefuseOthersAtAccept() throws {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
                                        "--legacy", "127.0.0.1:0=lesson@127.0.0.0/8",
                                        "--legacy", "[::1]:0=art@::1",
                                        "--legacy", "127.0.0.1:0=lesson@10.0.0.0/8,fd00::/8",  // excludes loopback
                                        "--legacy", "[::1]:0=art@127.0.0.0/8"],  // an IPv4 network never admits ::1
                                       tag: "legacy-cidr")
        let fields = try daemon.ready()
        let ipv4 = daemon.legacyPort(fields, index: 0), ipv6 = daemon.legacyPort(fields, index: 1)
        let outside = daemon.legacyPort(fields, index: 2), ipv6Outside = daemon.legacyPort(fields, index: 3)
        #expect(daemon.log.contains("room=lesson networks=10.0.0.0/8,fd00::/8"), "\(daemon.log)")
        #expect(daemon.log.contains("room=art networks=::1/128"), "\(daemon.log)")

        // Admitted from 127.0.0.1 and from ::1: each pair draws for the other.
        let teacher = try LegacyTestClient(port: ipv4), student = try LegacyTestClient(port: ipv4)
        let artist = try LegacyTestClient(ipv6Port: ipv6), viewer = try LegacyTestClient(ipv6Port: ipv6)
        #expect(daemon.waitForLine(containing: "author=2") != nil)
        #expect(daemon.log.split(separator: "\n").filter { $0.contains("legacy device joined") }.count == 4)
        teacher.send(DaemonLegacyTests.stroke)
        #expect(student.receive(count: 4) == DaemonLegacyTests.stroke, "\(daemon.log)")
        artist.send(DaemonLegacyTests.stroke)
        #expect(viewer.receive(count: 4) == DaemonLegacyTests.stroke, "\(daemon.log)")

        // Refused at accept: closed without a byte, twice from 127.0.0.1, once from ::1.
        for _ in 0..<2 {
            let stranger = try LegacyTestClient(port: outside)
            #expect(stranger.waitClosed(limitMicroseconds: 3_000_000))
            #expect(stranger.heartbeats == 0 && stranger.drain(microseconds: 0) == [])
        }
        let strangerIPv6 = try LegacyTestClient(ipv6Port: ipv6Outside)
        #expect(strangerIPv6.waitClosed(limitMicroseconds: 3_000_000))
        #expect(strangerIPv6.heartbeats == 0)
        // Nothing they did reached a room; the admitted devices still draw.
        teacher.send(["1,0.300000,0.300000,1", "1,0.300000,0.400000,3"])
        #expect(student.receive(count: 2) == ["1,0.300000,0.300000,1", "1,0.300000,0.400000,3"])
        #expect(viewer.drain(microseconds: 200_000) == [])

        // Every refusal counted; one line per address a minute.
        let metrics = try fetchMetrics(port: DaemonProcess.port(fields["metrics"])!)
        #expect(metricValue(metrics, "inkwire_legacy_refused_total{room=\"lesson\"}") == 2, "\(metrics)")
        #expect(metricValue(metrics, "inkwire_legacy_refused_total{room=\"art\"}") == 1, "\(metrics)")
        #expect(metricValue(metrics, "inkwire_connections_accepted_total{transport=\"legacy\"}") == 4)
        let refusals = daemon.log.split(separator: "\n").filter { $0.contains("legacy device refused") }
        #expect(refusals.count == 2, "\(daemon.log)")
        #expect(refusals.filter { $0.contains("room=lesson address=127.0.0.1 ") && $0.contains("networks=10.0.0.0/8,fd00::/8") }.count == 1, "\(refusals)")
        #expect(refusals.filter { $0.contains("room=art address=::1 ") && $0.contains("networks=127.0.0.0/8") }.count == 1, "\(refusals)")
        #expect(refusals.allSatisfy { $0.contains("level=warning") && $0.contains("refused_unlogged=0") })
    }

    @Test func aRefusedAddressIsLoggedOncePerMinuteWithTheCountBetween() {
        let log = LegacyRefusalLog()
        let a = SocketAddress("192.0.2.7:0")!, b = SocketAddress("[2001:db8::7]:0")!
        #expect(log.record(a, now: 1_000) == 0)
        #expect(log.record(a, now: 2_000) == nil)
        #expect(log.record(b, now: 3_000) == 0)
        #expect(log.record(a, now: 59_000_000) == nil)
        #expect(log.record(a, now: 1_000 + LegacyRefusalLog.intervalMicroseconds) == 2)
        #expect(log.record(nil, now: 5_000) == 0)
        #expect(log.record(nil, now: 6_000) == nil)
    }

    @Test func theRefusalLogStaysBoundedUnderManyAddresses() {
        let log = LegacyRefusalLog()
        for i in 0..<LegacyRefusalLog.maxAddresses {
            #expect(log.record(SocketAddress("[2001:db8::\(String(i, radix: 16))]:0")!, now: UInt64(i)) == 0)
        }
        // Full of recent addresses: a new one is counted (by the caller) but not logged.
        let late = SocketAddress("[2001:db8:1::1]:0")!
        #expect(log.record(late, now: 10_000) == nil)
        #expect(log.rememberedCount == LegacyRefusalLog.maxAddresses)
        // A minute on, the old entries make room.
        #expect(log.record(late, now: LegacyRefusalLog.intervalMicroseconds + 10_000) == 0)
        #expect(log.rememberedCount == 1)
    }
}
