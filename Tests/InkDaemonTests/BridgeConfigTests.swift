@testable import InkDaemon
import Testing

struct BridgeConfigTests {
    func parse(_ arguments: [String]) throws(ConfigError) -> DaemonConfig {
        try DaemonConfig.parse(arguments: arguments, environment: [:], readFile: { _ in nil })
    }

    @Test func bridgeFlags() throws {
        #expect(try parse([]).bridge == nil)
        let c = try parse(["--bridge", "mqtt://127.0.0.1:1883", "--bridge-topic-prefix", "school/inkwire", "--bridge-daemon-id", "room-1"])
        #expect(c.bridge == BridgeSettings(host: "127.0.0.1", port: 1883, topicPrefix: "school/inkwire", daemonID: "room-1"))
        #expect(try parse(["--bridge", "mqtt://[::1]:1884"]).bridge == BridgeSettings(host: "::1", port: 1884))
        let env = try DaemonConfig.parse(arguments: [], environment: ["INKWIRE_BRIDGE": "mqtt://broker:1883"], readFile: { _ in nil })
        #expect(env.bridge?.host == "broker" && env.bridge?.topicPrefix == "inkwire")
    }

    @Test(arguments: [
        ["--bridge", "tcp://127.0.0.1:1883"],
        ["--bridge", "mqtt://127.0.0.1"],
        ["--bridge", "mqtt://:1883"],
        ["--bridge", "mqtt://h:70000"],
        ["--bridge-topic-prefix", "x"],
        ["--bridge", "mqtt://h:1", "--bridge-topic-prefix", "a/#"],
        ["--bridge", "mqtt://h:1", "--bridge-daemon-id", "has space"],
    ])
    func badBridgeSettingsAreRefused(_ arguments: [String]) {
        #expect(throws: ConfigError.self) { try parse(arguments) }
    }
}
