import Glibc
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
        let user = try parse(["--bridge", "mqtt://inkwired@broker:1883", "--bridge-password-file", "/etc/inkwired/bridge-password"])
        #expect(user.bridge == BridgeSettings(host: "broker", port: 1883, username: "inkwired", passwordFile: "/etc/inkwired/bridge-password"))
    }

    @Test func thePasswordIsTheFilesFirstLine() throws {
        let directory = DaemonProcess.scratchDirectory("bridge-password")
        defer { _ = system("rm -rf '\(directory)'") }
        let path = directory + "/password"
        var settings = BridgeSettings(host: "h", port: 1, username: "u", passwordFile: path)
        #expect(throws: ConfigError.self) { try settings.readPassword() }
        writeFile(path, Array("s3cret pass\nignored\n".utf8))
        #expect(try settings.readPassword() == "s3cret pass")
        writeFile(path, Array("\n".utf8))
        #expect(throws: ConfigError.self) { try settings.readPassword() }
        settings.passwordFile = nil
        #expect(try settings.readPassword() == nil)
    }

    @Test(arguments: [
        ["--bridge", "tcp://127.0.0.1:1883"],
        ["--bridge", "mqtt://127.0.0.1"],
        ["--bridge", "mqtt://:1883"],
        ["--bridge", "mqtt://h:70000"],
        ["--bridge-topic-prefix", "x"],
        ["--bridge", "mqtt://h:1", "--bridge-topic-prefix", "a/#"],
        ["--bridge", "mqtt://h:1", "--bridge-daemon-id", "has space"],
        ["--bridge", "mqtt://user:pass@h:1"],
        ["--bridge", "mqtt://@h:1"],
        ["--bridge", "mqtt://h:1", "--bridge-password-file", "/p"],
        ["--bridge-password-file", "/p"],
    ])
    func badBridgeSettingsAreRefused(_ arguments: [String]) {
        #expect(throws: ConfigError.self) { try parse(arguments) }
    }
}
