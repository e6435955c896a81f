import Testing
import Foundation
@testable import InkDaemon

@Suite struct MetricsTests {
    @Test func rendersTheTextFormatInOrder() {
        let registry = MetricsRegistry()
        // Registered out of order: output is sorted by name, then by label values.
        let bytes = registry.counter("inkwire_bytes_received_total", help: "Bytes received.", labels: ["transport"])
        let rooms = registry.gauge("inkwire_rooms", help: "Open rooms.")
        let rtt = registry.histogram("inkwire_rtt_seconds", help: "Round-trip time.", buckets: [0.25, 1, 4], labels: ["transport"])
        bytes.labels("udp").increment(by: 1200)
        bytes.labels("tcp").increment(by: 30)
        bytes.labels("udp").increment()
        rooms.set(3)
        let udpRTT = rtt.labels("udp")
        for value in [0.125, 0.25, 0.5, 8] { udpRTT.observe(value) }
        #expect(registry.render() == """
            # HELP inkwire_bytes_received_total Bytes received.
            # TYPE inkwire_bytes_received_total counter
            inkwire_bytes_received_total{transport="tcp"} 30
            inkwire_bytes_received_total{transport="udp"} 1201
            # HELP inkwire_rooms Open rooms.
            # TYPE inkwire_rooms gauge
            inkwire_rooms 3
            # HELP inkwire_rtt_seconds Round-trip time.
            # TYPE inkwire_rtt_seconds histogram
            inkwire_rtt_seconds_bucket{transport="udp",le="0.25"} 2
            inkwire_rtt_seconds_bucket{transport="udp",le="1"} 3
            inkwire_rtt_seconds_bucket{transport="udp",le="4"} 3
            inkwire_rtt_seconds_bucket{transport="udp",le="+Inf"} 4
            inkwire_rtt_seconds_sum{transport="udp"} 8.875
            inkwire_rtt_seconds_count{transport="udp"} 4

            """)
        #expect(udpRTT.count == 4)
        #expect(bytes.labels("udp").value == 1201)
    }

    @Test func escapesHelpAndLabelValues() {
        let registry = MetricsRegistry()
        let errors = registry.counter("inkwire_errors_total", help: "Errors by kind\\class\nsecond line.", labels: ["kind"])
        errors.labels("quote\" back\\ nl\n").increment()
        let gauge = registry.gauge("inkwire_odd", help: "Odd values.", labels: ["v"])
        gauge.labels("nan").set(Double.nan)
        gauge.labels("inf").set(Double.infinity)
        gauge.labels("frac").set(-0.25)
        #expect(registry.render() == #"""
            # HELP inkwire_errors_total Errors by kind\\class\nsecond line.
            # TYPE inkwire_errors_total counter
            inkwire_errors_total{kind="quote\" back\\ nl\n"} 1
            # HELP inkwire_odd Odd values.
            # TYPE inkwire_odd gauge
            inkwire_odd{v="frac"} -0.25
            inkwire_odd{v="inf"} +Inf
            inkwire_odd{v="nan"} NaN

            """#)
    }

    @Test func seriesPerFamilyAreBounded() {
        let registry = MetricsRegistry()
        let counter = registry.counter("inkwire_peers_total", help: "Peers.", labels: ["peer"])
        for index in 0..<(MetricsRegistry.maximumSeriesPerFamily + 5) {
            counter.labels("p\(index)").increment()
        }
        #expect(registry.droppedSeries == 5)
        let lines = registry.render().split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(lines.count == MetricsRegistry.maximumSeriesPerFamily)
    }

    @Test func registeringTwiceReturnsTheSameFamily() {
        let registry = MetricsRegistry()
        registry.counter("inkwire_x_total", help: "X.").increment()
        registry.counter("inkwire_x_total", help: "X.").increment()
        #expect(registry.render().hasSuffix("inkwire_x_total 2\n"))
    }

    @Test func namesAreValidated() {
        #expect(MetricsRegistry.isValidMetricName("inkwire_rtt_seconds"))
        #expect(MetricsRegistry.isValidMetricName("a:b"))
        #expect(!MetricsRegistry.isValidMetricName("1abc"))
        #expect(!MetricsRegistry.isValidMetricName("a-b"))
        #expect(!MetricsRegistry.isValidMetricName(""))
        #expect(MetricsRegistry.isValidLabelName("transport"))
        #expect(!MetricsRegistry.isValidLabelName("__reserved"))
        #expect(!MetricsRegistry.isValidLabelName("a:b"))
    }

    /// The daemon's metric set, shaped as issue 7 lists it, passes `promtool check metrics`.
    @Test func passesPromtool() throws {
        let promtool = "/usr/bin/promtool"
        guard FileManager.default.isExecutableFile(atPath: promtool) else { return }  // package `prometheus` absent
        let registry = MetricsRegistry()
        let sessions = registry.gauge("inkwire_sessions", help: "Open sessions by transport.", labels: ["transport"])
        sessions.labels("udp").set(4)
        sessions.labels("tcp").set(1)
        sessions.labels("legacy").set(2)
        registry.gauge("inkwire_rooms", help: "Open rooms.").set(2)
        registry.gauge("inkwire_members", help: "Room members.").set(7)
        let datagrams = registry.counter("inkwire_datagrams_total", help: "Datagrams by direction.", labels: ["direction"])
        datagrams.labels("in").increment(by: 10)
        datagrams.labels("out").increment(by: 12)
        registry.counter("inkwire_bytes_total", help: "Bytes by direction.", labels: ["direction"]).labels("in").increment(by: 9000)
        registry.counter("inkwire_retransmissions_total", help: "Frames sent again.").increment(by: 3)
        let rtt = registry.histogram("inkwire_rtt_seconds", help: "Round-trip time per ack.",
                                     buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1])
        rtt.observe(0.0007)
        rtt.observe(0.03)
        registry.histogram("inkwire_reorder_depth_frames", help: "Reorder-buffer depth when a frame arrives.",
                           buckets: [0, 1, 2, 4, 8, 16, 32]).observe(3)
        registry.gauge("inkwire_history_bytes", help: "Durable history size.").set(123_456)
        registry.gauge("inkwire_syncs_in_progress", help: "Members catching up from history.").set(0)
        registry.counter("inkwire_refused_joins_total", help: "Joins refused by reason.", labels: ["reason"]).labels("bad_token").increment()
        registry.counter("inkwire_errors_total", help: "Errors by kind.", labels: ["kind"]).labels("malformed_frame").increment()
        let text = registry.render()

        let process = Process()
        process.executableURL = URL(fileURLWithPath: promtool)
        process.arguments = ["check", "metrics"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "promtool: \(report)\n\(text)")
        #expect(report.isEmpty, "promtool: \(report)")
    }
}
