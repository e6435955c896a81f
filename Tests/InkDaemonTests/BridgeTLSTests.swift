import Glibc
import Testing
@testable import InkDaemon

/// `--bridge mqtts://`: daemons bridged through a real mosquitto whose only listener is TLS,
/// with client certificates as identities and an ACL keeping the prefix to them. The test's own
/// CA, broker, daemon and stranger certificates are made with `openssl` in a scratch directory.
@Suite(.serialized) struct BridgeTLSTests {
    static let openssl = "/usr/bin/openssl"

    /// A CA, the broker's certificate (for 127.0.0.1) and a client certificate per name, all
    /// signed by the CA; and `other-ca.crt`, a CA that signed nothing here.
    static func makeCertificates(in directory: String, clients: [String]) -> Bool {
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        var script = """
            set -e; cd '\(directory)'
            \(openssl) req -x509 \(key) -keyout ca.key -out ca.crt -days 2 -subj /CN=inkwire-test-ca
            \(openssl) req -x509 \(key) -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=inkwire-test-ca
            printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext
            \(openssl) req \(key) -keyout server.key -out server.csr -subj /CN=broker
            \(openssl) x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt

            """
        for name in clients {
            script += """
                \(openssl) req \(key) -keyout \(name).key -out \(name).csr -subj /CN=\(name)
                \(openssl) x509 -req -in \(name).csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out \(name).crt
                chmod 600 \(name).key

                """
        }
        // mosquitto started as root reads its files as the user `mosquitto`.
        script += "chmod 755 .; chmod 644 ca.crt server.crt server.key acl\n"
        writeFile(directory + "/make.sh", Array(script.utf8))
        return system("sh '\(directory)/make.sh' > '\(directory)/make.log' 2>&1") == 0
    }

    static func broker(in directory: String) throws -> MQTTBroker {
        try MQTTBroker(access: """
            cafile \(directory)/ca.crt
            certfile \(directory)/server.crt
            keyfile \(directory)/server.key
            require_certificate true
            use_identity_as_username true
            acl_file \(directory)/acl
            log_type all

            """)
    }

    static func tls(_ directory: String, client: String, ca: String = "ca.crt") -> [String] {
        ["--bridge-ca-file", "\(directory)/\(ca)", "--bridge-cert-file", "\(directory)/\(client).crt", "--bridge-key-file", "\(directory)/\(client).key"]
    }

    @Test func roomsReplicateOverTLSAndAWrongCAIsRefusedClearly() throws {
        guard MQTTBroker.isInstalled, access(Self.openssl, X_OK) == 0 else { return }
        let directory = DaemonProcess.scratchDirectory("bridge-tls")
        defer { _ = system("rm -rf '\(directory)'") }
        // The ACL keeps the prefix to the daemons' identity (their certificate's CN).
        writeFile(directory + "/acl", Array("user inkwired\ntopic readwrite inkwire/#\nuser student\ntopic readwrite im/#\n".utf8))
        #expect(Self.makeCertificates(in: directory, clients: ["inkwired", "student"]), "\(String(decoding: readFile(directory + "/make.log"), as: UTF8.self))")
        let broker = try Self.broker(in: directory)

        let a = try BridgeDaemonTests.start("a", broker: broker, tag: "bridge-tls-a", scheme: "mqtts", extra: Self.tls(directory, client: "inkwired"))
        let native = BridgeDaemonTests.trace(strokes: 20, tag: 6, in: a.directory)
        let watcherA = try BridgeDaemonTests.watch(a, user: "wa", count: native.lines.count, idle: "20")
        #expect(BridgeDaemonTests.homeDecided(a, selfHome: true), "\(a.process.log)")
        let b = try BridgeDaemonTests.start("b", broker: broker, tag: "bridge-tls-b", scheme: "mqtts", extra: Self.tls(directory, client: "inkwired"))
        let watcherB = try BridgeDaemonTests.watch(b, user: "wb", count: native.lines.count, idle: "20")
        #expect(BridgeDaemonTests.homeDecided(b, selfHome: false), "\(b.process.log)")
        // A daemon holding a certificate of the same CA but another identity: the ACL keeps it
        // off the prefix, so it never hears of the room.
        let c = try BridgeDaemonTests.start("c", broker: broker, tag: "bridge-tls-c", scheme: "mqtts", extra: Self.tls(directory, client: "student"))
        let watcherC = try BridgeDaemonTests.watch(c, user: "wc", idle: "3")
        // A daemon that trusts another CA refuses the broker's certificate and says why.
        let d = try BridgeDaemonTests.start("d", broker: broker, tag: "bridge-tls-d", scheme: "mqtts",
                                           extra: Self.tls(directory, client: "inkwired", ca: "other-ca.crt"))

        let sender = try BridgeDaemonTests.send(a, user: "ada", trace: native.path, speed: "4")
        #expect(sender.wait() == 0, "\(sender.errors)")
        #expect(watcherA.wait() == 0, "\(watcherA.errors)")
        #expect(watcherB.wait() == 0, "\(watcherB.errors)")
        #expect(watcherA.outputLines == native.lines)
        #expect(watcherB.outputLines == native.lines)
        #expect(watcherC.wait() == 0, "\(watcherC.errors)")
        #expect(watcherC.outputLines == [])

        #expect(a.process.log.contains("tls=on"))
        let refusal = d.process.waitForLine(containing: "bridge cannot connect")
        #expect(refusal?.contains("tls=true") == true, "\(d.process.log)")
        #expect(refusal?.contains("A TLS error occurred.") == true, "\(refusal ?? d.process.log)")
        #expect(refusal?.contains("OpenSSL Error[0]: error:0A000086:SSL routines::certificate verify failed (self-signed certificate in certificate chain)") == true,
                "\(refusal ?? "")")
        #expect(refusal?.contains("hint=\"the broker's certificate does not chain to --bridge-ca-file or does not name 127.0.0.1\"") == true, "\(refusal ?? "")")
        let scrapeD = try fetchMetrics(port: d.metricsPort)
        #expect(metricValue(scrapeD, "inkwire_bridge_connected") == 0)
        #expect((metricValue(scrapeD, "inkwire_bridge_connect_failures_total") ?? 0) >= 1)
        // Retries with the same error are not logged again within the minute.
        usleep(1_500_000)
        #expect(d.process.log.split(separator: "\n").filter { $0.contains("bridge cannot connect") }.count == 1, "\(d.process.log)")
        let scrapeA = try fetchMetrics(port: a.metricsPort), scrapeB = try fetchMetrics(port: b.metricsPort)
        #expect(metricValue(scrapeA, "inkwire_bridge_connected") == 1 && metricValue(scrapeB, "inkwire_bridge_connected") == 1)
        #expect(metricValue(scrapeA, "inkwire_bridge_rooms_led") == 1 && metricValue(scrapeB, "inkwire_bridge_rooms_led") == 0)
        #expect(broker.log.contains("Denied SUBSCRIBE") || broker.log.contains("Denied PUBLISH"), "\(broker.log)")
    }

    @Test func tlsSettingsAreCheckedBeforeTheStart() throws {
        guard access(Self.openssl, X_OK) == 0 else { return }
        let directory = DaemonProcess.scratchDirectory("bridge-tls-files")
        defer { _ = system("rm -rf '\(directory)'") }
        writeFile(directory + "/acl", [])
        #expect(Self.makeCertificates(in: directory, clients: ["inkwired"]))
        #expect(system("cd '\(directory)' && \(Self.openssl) pkey -in inkwired.key -aes256 -passout pass:secret -out encrypted.key 2>/dev/null && chmod 600 encrypted.key") == 0)
        func check(_ tls: BridgeTLS) throws(ConfigError) {
            try BridgeSettings.parse(url: "mqtts://127.0.0.1:8883", prefix: nil, daemonID: nil, tls: tls)?.tls?.checkFiles()
        }
        try check(BridgeTLS(caFile: directory + "/ca.crt", certificateFile: directory + "/inkwired.crt", keyFile: directory + "/inkwired.key"))
        try check(BridgeTLS())
        #expect(throws: ConfigError("--bridge-ca-file \(directory)/missing: cannot read the file (or it is larger than 4194304 bytes): No such file or directory")) {
            try check(BridgeTLS(caFile: directory + "/missing"))
        }
        #expect(throws: ConfigError("--bridge-ca-file \(directory)/inkwired.key: expected CA certificates in PEM form (-----BEGIN CERTIFICATE-----...)")) {
            try check(BridgeTLS(caFile: directory + "/inkwired.key"))
        }
        #expect(throws: ConfigError("--bridge-key-file \(directory)/ca.crt: expected a private key in PEM form (PRIVATE KEY-----...)")) {
            try check(BridgeTLS(certificateFile: directory + "/inkwired.crt", keyFile: directory + "/ca.crt"))
        }
        #expect(throws: ConfigError("--bridge-key-file \(directory)/encrypted.key: the key is encrypted and the daemon cannot ask for its passphrase; store it unencrypted (openssl pkey -in KEY -out PLAIN) readable by the daemon only")) {
            try check(BridgeTLS(certificateFile: directory + "/inkwired.crt", keyFile: directory + "/encrypted.key"))
        }
        _ = chmod(directory + "/inkwired.key", 0o644)
        #expect(throws: ConfigError("--bridge-key-file \(directory)/inkwired.key: every user may read this private key; chmod o-r it (or pass it as a systemd credential)")) {
            try check(BridgeTLS(certificateFile: directory + "/inkwired.crt", keyFile: directory + "/inkwired.key"))
        }
        // The daemon and --check-config stop on them with exit 2.
        let checked = try DaemonProcess(["--check-config", "--bridge", "mqtts://127.0.0.1:8883", "--bridge-ca-file", directory + "/inkwired.key"], tag: "bridge-tls-check")
        #expect(checked.waitExit() == 2)
        #expect(checked.log.contains("expected CA certificates in PEM form"), "\(checked.log)")
    }
}
