import Glibc
import InkBenchSupport
import LegacyAppModel
import InkVersion
import Testing

/// Socket activation and the metrics format, with the real daemon.
@Suite struct DaemonActivationTests {
    /// A bound loopback socket (listening for streams) and its port.
    static func boundSocket(_ type: __socket_type) throws -> (Int32, UInt16) {
        let fd = socket(AF_INET, Int32(type.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Bool in
                guard bind(fd, raw, length) == 0 else { return false }
                return getsockname(fd, raw, &length) == 0
            }
        }
        guard bound, type != SOCK_STREAM || listen(fd, 16) == 0 else {
            throw DaemonProcess.SpawnError(message: "bind: \(String(cString: strerror(errno)))")
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    @Test func adoptsSocketsPassedBySystemd() throws {
        let (udp, udpPort) = try Self.boundSocket(SOCK_DGRAM)
        let (tcp, tcpPort) = try Self.boundSocket(SOCK_STREAM)
        let (legacy, legacyPort) = try Self.boundSocket(SOCK_STREAM)
        let (metrics, metricsPort) = try Self.boundSocket(SOCK_STREAM)
        defer { [udp, tcp, legacy, metrics].forEach { close($0) } }
        // The flags name other addresses: adopted sockets replace them.
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:1", "--tcp", "127.0.0.1:1"],
                                       environment: ["LISTEN_FDS": "4", "LISTEN_FDNAMES": "udp:tcp:legacy-art class:metrics"],
                                       tag: "activation", passing: [udp, tcp, legacy, metrics])
        let fields = try daemon.ready()
        #expect(fields["udp"] == "127.0.0.1:\(udpPort)")
        #expect(fields["tcp"] == "127.0.0.1:\(tcpPort)")
        #expect(fields["legacy"] == "127.0.0.1:\(legacyPort)=art class")
        #expect(fields["metrics"] == "127.0.0.1:\(metricsPort)")
        let runner = LegacyAppRunner(seed: 41)
        let a = try runner.connect("a", port: legacyPort)
        let b = try runner.connect("b", port: legacyPort)
        #expect(LegacyApps.waitUp(runner, [a, b]))
        let line = ["1,0.100000,0.100000,1", "1,0.100000,0.100000,3"]
        LegacyApps.draw(line, on: a, runner)
        #expect(LegacyApps.waitScreens(runner, [a, b], equal: LegacyApps.screen(line)), "\(b)")
        let text = try fetchMetrics(port: metricsPort)
        #expect(metricValue(text, "inkwire_rooms") == 1)
        #expect(metricValue(text, "inkwire_members") == 2)
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)
    }

    @Test func metricsPassPromtool() throws {
        guard access("/usr/bin/promtool", X_OK) == 0 else { return }  // Debian package `prometheus`
        let (daemon, ports) = try DaemonNativeTests.start("promtool", extra: ["--metrics", "127.0.0.1:0"])
        defer { withExtendedLifetime(daemon) {} }
        let fields = try daemon.ready()
        let runner = LegacyAppRunner(seed: 42)
        let app = try runner.connect("app", port: ports.legacy)
        let device = try NativeTestClient(.udp, port: ports.udp)
        #expect(DaemonNativeTests.joined(device, user: "pen", role: .presenter) != nil)
        #expect(LegacyApps.waitUp(runner, [app]))
        LegacyApps.draw(["1,0.100000,0.100000,1", "1,0.200000,0.100000,3"], on: app, runner)
        device.idle(microseconds: 1_200_000)  // a housekeeping round samples RTT
        let text = try fetchMetrics(port: DaemonProcess.port(fields["metrics"])!)
        for family in ["inkwire_sessions", "inkwire_rooms", "inkwire_members", "inkwire_datagrams_received_total",
                       "inkwire_sent_bytes_total", "inkwire_retransmissions_total", "inkwire_rtt_seconds",
                       "inkwire_reorder_depth", "inkwire_history_bytes", "inkwire_syncs_in_progress",
                       "inkwire_refused_joins_total", "inkwire_errors_total"] {
            #expect(text.contains("# TYPE \(family) "), "missing \(family)")
        }
        #expect(metricValue(text, "inkwire_sessions{transport=\"udp\"}") == 1)
        #expect(metricValue(text, "inkwire_sessions{transport=\"legacy\"}") == 1)
        #expect((metricValue(text, "inkwire_rtt_seconds_count") ?? 0) >= 1)
        // Counters are counters; the build and the process are described.
        #expect(text.contains("# TYPE inkwire_store_commits_total counter\n"))
        #expect(text.contains("# TYPE process_cpu_seconds_total counter\n"))
        #expect(metricValue(text, "inkwire_build_info{version=\"\(InkwireVersion.string)\",commit=\"\(InkwireVersion.commit)\"}") == 1)
        #expect((metricValue(text, "process_cpu_seconds_total") ?? 0) > 0)
        #expect((metricValue(text, "process_resident_memory_bytes") ?? 0) > 1_048_576)
        #expect((metricValue(text, "process_virtual_memory_bytes") ?? 0) >= (metricValue(text, "process_resident_memory_bytes") ?? 0))
        let openFDs = metricValue(text, "process_open_fds") ?? 0
        #expect(openFDs >= 5 && openFDs < (metricValue(text, "process_max_fds") ?? 0), "\(openFDs) open descriptors")
        let started = metricValue(text, "process_start_time_seconds") ?? 0
        #expect(abs(started - Double(time(nil))) < 120, "start time \(started)")
        let path = daemon.dataDir + "/metrics.txt"
        writeFile(path, Array(text.utf8))
        let status = system("/usr/bin/promtool check metrics < '\(path)' > '\(path).out' 2>&1")
        let report = String(decoding: readFile(path + ".out"), as: UTF8.self)
        #expect(status == 0, "promtool: \(report)")
    }
}
