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

    @Test func mqttsTakesTLSFiles() throws {
        var expected = BridgeSettings(host: "broker.school.example", port: 8883, username: "inkwired", passwordFile: "/p")
        expected.tls = BridgeTLS(caFile: "/etc/inkwired/ca.crt")
        #expect(try parse(["--bridge", "mqtts://inkwired@broker.school.example:8883", "--bridge-password-file", "/p",
                           "--bridge-ca-file", "/etc/inkwired/ca.crt"]).bridge == expected)
        let system = try parse(["--bridge", "mqtts://[::1]:8883"]).bridge?.tls
        #expect(system == BridgeTLS())
        #expect(system?.client == MQTTClient.TLS(caDirectory: "/etc/ssl/certs"))
        let withCertificate = try parse(["--bridge", "mqtts://h:8883", "--bridge-ca-file", "/ca", "--bridge-cert-file", "/c", "--bridge-key-file", "/k"])
        #expect(withCertificate.bridge?.tls?.client == MQTTClient.TLS(caFile: "/ca", certificateFile: "/c", keyFile: "/k"))
        #expect(try parse(["--bridge", "mqtt://h:1883"]).bridge?.tls == nil)
    }

    @Test(arguments: [
        (["--bridge", "mqtt://h:1883", "--bridge-ca-file", "/ca"],
         "--bridge-ca-file, --bridge-cert-file and --bridge-key-file need TLS: --bridge mqtts://HOST:PORT"),
        (["--bridge-ca-file", "/ca"],
         "--bridge-topic-prefix, --bridge-daemon-id, --bridge-password-file and the --bridge-*-file TLS settings need --bridge"),
        (["--bridge", "mqtts://h:8883", "--bridge-cert-file", "/c"],
         "--bridge-cert-file and --bridge-key-file go together (a client certificate and its private key)"),
        (["--bridge", "mqtts://h:8883", "--bridge-key-file", "/k"],
         "--bridge-cert-file and --bridge-key-file go together (a client certificate and its private key)"),
        (["--bridge", "mqtts://h:8883", "--bridge-ca-file", ""], "--bridge-ca-file: expected a file path of 1 to 4096 bytes"),
        (["--bridge", "mqtts://h:8883", "--bridge-ca-file", "/" + String(repeating: "a", count: 4096)], "--bridge-ca-file: expected a file path of 1 to 4096 bytes"),
        (["--bridge", "ssl://h:8883"], "--bridge 'ssl://h:8883': expected mqtt://HOST:PORT or mqtts://HOST:PORT (TLS)"),
        (["--bridge", "mqtts://h"], "--bridge 'mqtts://h': expected mqtts://HOST:PORT with a port from 1 to 65535"),
    ])
    func badTLSSettingsSayWhy(_ arguments: [String], _ message: String) {
        #expect(throws: ConfigError(message)) { try parse(arguments) }
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
