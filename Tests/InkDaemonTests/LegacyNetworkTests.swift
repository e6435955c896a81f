import Glibc
import InkBenchSupport
import InkUV
import LegacyAppModel
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

        // Admitted from 127.0.0.1 and from ::1: each pair of apps draws for the other.
        let runner = LegacyAppRunner(seed: 21)
        let teacher = try runner.connect("teacher", port: ipv4), student = try runner.connect("student", port: ipv4)
        let artist = try runner.connect("artist", port: ipv6, ipv6: true), viewer = try runner.connect("viewer", port: ipv6, ipv6: true)
        let admitted = [teacher, student, artist, viewer]
        #expect(LegacyApps.waitUp(runner, admitted), "\(admitted)")
        #expect(ClientEndToEndTests.waitUntil { daemon.log.split(separator: "\n").filter { $0.contains("legacy device joined") }.count == 4 })
        runner.run(limitMicroseconds: 1_000_000)  // the daemon writes nothing for 1 s
        LegacyApps.draw(DaemonLegacyTests.stroke, on: teacher, runner)
        let stroke = LegacyApps.screen(DaemonLegacyTests.stroke)
        #expect(LegacyApps.waitScreens(runner, [teacher, student], equal: stroke), "\(daemon.log)")
        LegacyApps.draw(DaemonLegacyTests.reply, on: artist, runner)
        let art = LegacyApps.screen(DaemonLegacyTests.reply)
        #expect(LegacyApps.waitScreens(runner, [artist, viewer], equal: art), "\(daemon.log)")

        // Refused at accept: closed without a byte, twice from 127.0.0.1, once from ::1.
        let strangers = [try runner.connect("stranger-1", port: outside), try runner.connect("stranger-2", port: outside),
                         try runner.connect("stranger-ipv6", port: ipv6Outside, ipv6: true)]
        #expect(runner.run(limitMicroseconds: 3_000_000) { strangers.allSatisfy { !$0.isConnected } }, "\(strangers)")
        for app in strangers {
            #expect(app.model.state == .disconnected("peer closed the connection") && app.model.bytesRead == 0, "\(app)")
        }
        // Nothing they did reached a room; the admitted apps still draw.
        let line = ["1,0.300000,0.300000,1", "1,0.300000,0.400000,3"]
        LegacyApps.draw(line, on: teacher, runner)
        let lesson = LegacyApps.screen(DaemonLegacyTests.stroke + line)  // with the teacher's pen
        #expect(LegacyApps.waitScreens(runner, [teacher, student], equal: lesson), "\(student)")
        runner.run(limitMicroseconds: 200_000)
        #expect(viewer.model.screen == art && artist.model.screen == art)
        for app in admitted { #expect(app.isConnected && app.model.desync == nil, "\(app)") }

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
        for i in 0..<LegacyRefusalLog.maxOffenders {
            #expect(log.record(SocketAddress("[2001:db8::\(String(i, radix: 16))]:0")!, now: UInt64(i)) == 0)
        }
        // Full of recent addresses: a new one is counted (by the caller) but not logged.
        let late = SocketAddress("[2001:db8:1::1]:0")!
        #expect(log.record(late, now: 10_000) == nil)
        #expect(log.rememberedCount == LegacyRefusalLog.maxOffenders)
        // A minute on, the old entries make room.
        #expect(log.record(late, now: LegacyRefusalLog.intervalMicroseconds + 10_000) == 0)
        #expect(log.rememberedCount == 1)
    }
}
