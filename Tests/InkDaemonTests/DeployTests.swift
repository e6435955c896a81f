import Foundation
import Glibc
import InkVersion
import Testing
@testable import InkDaemon

/// deploy/: the systemd units, the settings example, the man page and the install scripts,
/// checked offline (no systemd as PID 1 needed) against the built `inkwired`.
@Suite struct DeployTests {
    /// The package root, from this file's path.
    static let packageRoot = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/"))
    static let deploy = packageRoot + "/deploy"
    /// Bound on one helper command (systemd-analyze, install.sh...).
    static let commandLimitMicroseconds: UInt64 = 60_000_000
    /// The issue's target for `systemd-analyze security --offline=yes`.
    static let exposureTarget = 2.0
    static let units = ["inkwired.service", "inkwired.socket", "inkwired-tcp.socket", "inkwired-metrics.socket"]

    /// Runs `argv` (a path, not searched) to completion: exit code (nil on time-out) and its
    /// stdout and stderr together.
    static func run(_ argv: [String], environment: [String: String] = [:], scratch: String) throws -> (Int32?, String) {
        let outPath = scratch + "/command-\(UInt32.random(in: 0...UInt32.max)).out"
        var env = environment
        if env["PATH"] == nil { env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin" }
        let child = try ChildSpawn.spawn(argv, environment: env, redirects: [
            (0, .file("/dev/null")), (1, .file(outPath)), (2, .descriptor(1)),
        ])
        let deadline = monotonicMicroseconds() + commandLimitMicroseconds
        var status: Int32 = 0
        var code: Int32?
        while monotonicMicroseconds() < deadline {
            if waitpid(child, &status, WNOHANG) == child {
                code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                break
            }
            usleep(5_000)
        }
        if code == nil {
            kill(child, SIGKILL)
            waitpid(child, &status, 0)
        }
        return (code, String(decoding: readFile(outPath), as: UTF8.self))
    }

    static func text(_ path: String) -> String { String(decoding: readFile(path), as: UTF8.self) }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// The scratch directory, removed at the end.
    static func withScratch<T>(_ tag: String, _ body: (String) throws -> T) rethrows -> T {
        let scratch = DaemonProcess.scratchDirectory(tag)
        defer { _ = system("rm -rf '\(scratch)'") }
        return try body(scratch)
    }

    // MARK: man page and settings example

    @Test func manPageIsGeneratedFromHelp() throws {
        try Self.withScratch("man") { scratch in
            let (code, generated) = try Self.run(["/bin/bash", Self.deploy + "/gen-man.sh", DaemonProcess.binaryPath], scratch: scratch)
            #expect(code == 0)
            #expect(generated == Self.text(Self.deploy + "/inkwired.8"),
                    "deploy/inkwired.8 is stale: run deploy/gen-man.sh .build/debug/inkwired > deploy/inkwired.8")
            for flag in ConfigFlag.all where !flag.hidden {
                let escaped = "--\(flag.name)".replacingHyphens()
                #expect(generated.contains(".B \(escaped)\n") || generated.contains(".BI \"\(escaped) \""), "--\(flag.name) missing")
            }
        }
    }

    @Test func clientManPageIsGeneratedFromHelp() throws {
        try Self.withScratch("man1") { scratch in
            let (code, generated) = try Self.run(["/bin/bash", Self.deploy + "/gen-man-client.sh", ClientProcess.binaryPath], scratch: scratch)
            #expect(code == 0)
            #expect(generated == Self.text(Self.deploy + "/inkwire.1"),
                    "deploy/inkwire.1 is stale: run deploy/gen-man-client.sh .build/debug/inkwire > deploy/inkwire.1")
            for command in ["send", "watch", "export", "codec", "demo-trace"] {
                #expect(generated.contains(".SS \(command.replacingHyphens())\n"), "\(command) missing")
            }
        }
    }

    @Test func theVersionIsTheVersionFileAndTheChangelogsNewestEntry() {
        let version = Self.text(Self.packageRoot + "/VERSION").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version == InkwireVersion.string)
        let changelog = Self.text(Self.packageRoot + "/CHANGELOG.md")
        let newest = changelog.split(separator: "\n").first { $0.hasPrefix("## ") }
        #expect(newest == "## \(version)", "CHANGELOG.md must start with ## \(version)")
        #expect(InkwireVersion.commit.count == 12 || InkwireVersion.commit == "unknown")
        #expect(Self.text(Self.packageRoot + "/LICENSE").contains("Apache License"))
    }

    /// Every `inkwire_*` or `process_*` name in a PromQL expression.
    static func metricNames(inQuery query: String) -> Set<String> {
        var names: Set<String> = []
        var current = ""
        for scalar in (query + " ").unicodeScalars {
            if scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_" || scalar == ":" {
                current.unicodeScalars.append(scalar)
            } else {
                if current.hasPrefix("inkwire_") || current.hasPrefix("process_") { names.insert(current) }
                current = ""
            }
        }
        return names
    }

    /// The values of every `expr` and `query`/`definition` string in a decoded dashboard.
    static func queries(in value: Any) -> [String] {
        if let object = value as? [String: Any] {
            return object.flatMap { key, inner -> [String] in
                if ["expr", "definition"].contains(key), let text = inner as? String { return [text] }
                if key == "query", let text = inner as? String { return [text] }
                return queries(in: inner)
            }
        }
        if let array = value as? [Any] { return array.flatMap { queries(in: $0) } }
        return []
    }

    @Test func grafanaDashboardIsValidJSONAndNamesOnlyExportedMetrics() throws {
        let bytes = readFile(Self.deploy + "/grafana-inkwired.json")
        let dashboard = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        #expect(panels.count >= 10)
        let used = Set(Self.queries(in: dashboard).flatMap { Self.metricNames(inQuery: $0) })
        #expect(used.contains("inkwire_build_info") && used.contains("process_cpu_seconds_total") && used.contains("inkwire_store_commits_total"))
        // What the real daemon exports: each family, and a histogram's _bucket, _sum and _count.
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off", "--metrics", "127.0.0.1:0"], tag: "grafana")
        let text = try fetchMetrics(port: DaemonProcess.port(try daemon.ready()["metrics"])!)
        var exported: Set<String> = []
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            let name = String(parts[2])
            exported.insert(name)
            if parts[3] == "histogram" { for suffix in ["_bucket", "_sum", "_count"] { exported.insert(name + suffix) } }
        }
        #expect(used.subtracting(exported).isEmpty, "the dashboard names metrics inkwired does not export: \(used.subtracting(exported).sorted())")
        // Every family the daemon always exports is on the dashboard.
        let families = Set(exported.filter { !$0.hasSuffix("_bucket") && !$0.hasSuffix("_sum") && !$0.hasSuffix("_count") })
        #expect(families.subtracting(used.map { $0.hasSuffix("_bucket") ? String($0.dropLast(7)) : $0 }).isEmpty,
                "not on the dashboard: \(families.subtracting(used.map { $0.hasSuffix("_bucket") ? String($0.dropLast(7)) : $0 }).sorted())")
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)
    }

    @Test func settingsExampleNamesEveryVariableAndIsAValidConfig() throws {
        let example = Self.text(Self.deploy + "/inkwired.env")
        // Every setting but INKWIRE_CONFIG: the unit passes --config with this file's path.
        for flag in ConfigFlag.all where !flag.hidden && flag.value != nil && flag.name != "config" {
            #expect(example.contains("\(flag.environmentName)="), "\(flag.environmentName) missing from deploy/inkwired.env")
        }
        // Every name it mentions is one the daemon knows (commented or not).
        for line in example.split(separator: "\n") {
            let bare = line.hasPrefix("#INKWIRE_") ? line.dropFirst() : line
            guard bare.hasPrefix("INKWIRE_"), let equals = bare.firstIndex(of: "=") else { continue }
            let name = String(bare[..<equals])
            #expect(ConfigFlag.all.contains { $0.environmentName == name && !$0.hidden }, "unknown \(name)")
        }
        // With every setting switched on (its example values), the daemon accepts the file.
        try Self.withScratch("env") { scratch in
            // (Files it names that this machine lacks are left out; the TLS files need mqtts://.)
            let absent = ["INKWIRE_TOKEN_SECRET_FILE", "INKWIRE_CONFIG", "INKWIRE_BRIDGE_PASSWORD_FILE", "INKWIRE_KEY_FILE",
                          "INKWIRE_BRIDGE_CA_FILE", "INKWIRE_BRIDGE_CERT_FILE", "INKWIRE_BRIDGE_KEY_FILE"]
            let enabled = example.split(separator: "\n", omittingEmptySubsequences: false)
                .filter { line in !absent.contains { line.contains($0) } }
                .map { $0.hasPrefix("#INKWIRE_") ? String($0.dropFirst()) : String($0) }
                .joined(separator: "\n")
                .replacingOccurrences("[::]:7420", "127.0.0.1:0")
            writeFile(scratch + "/inkwired.env", Array(enabled.utf8))
            let (code, out) = try Self.run([DaemonProcess.binaryPath, "--check-config", "--config", scratch + "/inkwired.env",
                                            "--data-dir", scratch + "/data"], scratch: scratch)
            #expect(code == 0, "\(out)")
        }
    }

    // MARK: systemd-analyze

    static let systemdAnalyze = "/usr/bin/systemd-analyze"

    @Test func unitsPassVerify() throws {
        guard Self.exists(Self.systemdAnalyze) else { return }  // Debian package `systemd`
        try Self.withScratch("verify") { scratch in
            // verify needs ExecStart= to exist: point it at the built daemon. Documentation=
            // man:inkwired(8) must resolve: offer the committed page through MANPATH.
            _ = system("mkdir -p '\(scratch)/units' '\(scratch)/man/man8' && cp '\(Self.deploy)/inkwired.8' '\(scratch)/man/man8/'")
            for unit in Self.units {
                let text = Self.text(Self.deploy + "/" + unit).replacingOccurrences("/usr/local/bin/inkwired", DaemonProcess.binaryPath)
                writeFile(scratch + "/units/" + unit, Array(text.utf8))
            }
            let man = Self.exists("/usr/bin/man") ? "--man=yes" : "--man=no"
            let (code, out) = try Self.run([Self.systemdAnalyze, "verify", man] + Self.units.map { scratch + "/units/" + $0 },
                                           environment: ["MANPATH": scratch + "/man", "SYSTEMD_LOG_COLOR": "0"], scratch: scratch)
            #expect(code == 0, "\(out)")
            #expect(!out.contains("inkwired"), "\(out)")
        }
    }

    /// "Overall exposure level for inkwired.service: 1.1 OK" → 1.1
    static func exposure(_ output: String) -> Double? {
        guard let line = output.split(separator: "\n").last(where: { $0.contains("Overall exposure level") }) else { return nil }
        return line.split(separator: " ").lazy.compactMap { Double($0) }.first
    }

    @Test func serviceExposureIsWithinTarget() throws {
        guard Self.exists(Self.systemdAnalyze) else { return }
        #expect(Self.exposure("\u{2192} Overall exposure level for inkwired.service: 1.1 OK \u{1F642}") == 1.1)
        try Self.withScratch("security") { scratch in
            let (_, out) = try Self.run([Self.systemdAnalyze, "security", "--offline=yes", "--no-pager", Self.deploy + "/inkwired.service"],
                                        environment: ["SYSTEMD_COLORS": "0"], scratch: scratch)
            let level = try #require(Self.exposure(out), "\(out)")
            #expect(level <= Self.exposureTarget, "\(out)")
        }
    }

    // MARK: socket units

    /// The `Listen*=` kind and `FileDescriptorName=` of a socket unit.
    static func socketUnit(_ name: String) -> (datagram: Bool, fdName: String)? {
        var datagram: Bool?
        var fdName: String?
        for line in text(deploy + "/" + name).split(separator: "\n") {
            if line.hasPrefix("ListenDatagram=") { datagram = true }
            if line.hasPrefix("ListenStream=") { datagram = false }
            if line.hasPrefix("FileDescriptorName=") { fdName = String(line.dropFirst("FileDescriptorName=".count)) }
        }
        guard let datagram, let fdName else { return nil }
        return (datagram, fdName)
    }

    @Test func daemonAdoptsTheSocketsTheUnitsName() throws {
        let sockets = Self.units.filter { $0.hasSuffix(".socket") }.compactMap(Self.socketUnit)
        #expect(sockets.map(\.fdName) == ["udp", "tcp", "metrics"])
        var passed: [(fd: Int32, port: UInt16)] = []
        defer { passed.forEach { close($0.fd) } }
        for socket in sockets { passed.append(try DaemonActivationTests.boundSocket(socket.datagram ? SOCK_DGRAM : SOCK_STREAM)) }
        let daemon = try DaemonProcess([], environment: ["LISTEN_FDS": "\(passed.count)",
                                                         "LISTEN_FDNAMES": sockets.map(\.fdName).joined(separator: ":")],
                                       tag: "units", passing: passed.map(\.fd))
        let fields = try daemon.ready()
        for (socket, bound) in zip(sockets, passed) {
            #expect(fields[socket.fdName] == "127.0.0.1:\(bound.port)", "\(fields)")
        }
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)
    }

    // MARK: install.sh / uninstall.sh

    /// Every file or link under `root` (directories left empty do not count).
    static func files(under root: String, scratch: String) throws -> [String] {
        let (_, out) = try run(["/usr/bin/find", root, "-not", "-type", "d"], scratch: scratch)
        return out.split(separator: "\n").map { String($0.dropFirst(root.count)) }.sorted()
    }

    @Test func installIntoARootAndUninstallLeavesItClean() throws {
        try Self.withScratch("install") { scratch in
            let root = scratch + "/root"
            let binDir = String(DaemonProcess.binaryPath.dropLast("/inkwired".count))
            let install = ["/bin/bash", Self.deploy + "/install.sh", "--root", root, "--bin-dir", binDir]
            let uninstall = ["/bin/bash", Self.deploy + "/uninstall.sh", "--root", root]
            let (code, out) = try Self.run(install, scratch: scratch)
            #expect(code == 0, "\(out)")
            let installed = ["/etc/default/inkwired", "/etc/systemd/system/inkwired-metrics.socket", "/etc/systemd/system/inkwired-tcp.socket",
                             "/etc/systemd/system/inkwired.service", "/etc/systemd/system/inkwired.socket",
                             "/usr/local/bin/inkwire", "/usr/local/bin/inkwired", "/usr/local/share/man/man8/inkwired.8"]
            #expect(try Self.files(under: root, scratch: scratch) == installed)
            #expect(out.contains("installed  /usr/local/bin/inkwired"))
            #expect(out.contains("skipped    systemctl"))
            #expect(Self.text(root + "/etc/default/inkwired") == Self.text(Self.deploy + "/inkwired.env"))

            // Again: nothing changes, and an edited settings file is kept.
            writeFile(root + "/etc/default/inkwired", Array("INKWIRE_LOG_LEVEL=debug\n".utf8))
            let (again, againOut) = try Self.run(install, scratch: scratch)
            #expect(again == 0)
            #expect(!againOut.split(separator: "\n").contains { $0.hasPrefix("installed") }, "\(againOut)")
            #expect(againOut.contains("kept       /etc/default/inkwired"))

            // Uninstall keeps the edited settings and the history; --purge removes them.
            _ = system("mkdir -p '\(root)/var/lib/private/inkwired' && ln -s private/inkwired '\(root)/var/lib/inkwired' && touch '\(root)/var/lib/private/inkwired/rooms.sqlite'")
            let (removed, removedOut) = try Self.run(uninstall, scratch: scratch)
            #expect(removed == 0, "\(removedOut)")
            #expect(try Self.files(under: root, scratch: scratch) == ["/etc/default/inkwired", "/var/lib/inkwired", "/var/lib/private/inkwired/rooms.sqlite"])
            let (purged, purgedOut) = try Self.run(uninstall + ["--purge"], scratch: scratch)
            #expect(purged == 0, "\(purgedOut)")
            #expect(try Self.files(under: root, scratch: scratch) == [])

            // An unchanged example goes with a plain uninstall.
            _ = try Self.run(install, scratch: scratch)
            _ = try Self.run(uninstall, scratch: scratch)
            #expect(try Self.files(under: root, scratch: scratch) == [])

            // --prefix moves the binaries and man page, and the unit follows.
            _ = try Self.run(install + ["--prefix", "/opt/inkwire"], scratch: scratch)
            #expect(Self.text(root + "/etc/systemd/system/inkwired.service").contains("\nExecStart=/opt/inkwire/bin/inkwired --config /etc/default/inkwired --data-dir"))
            #expect(Self.exists(root + "/opt/inkwire/share/man/man8/inkwired.8"))
            _ = try Self.run(uninstall + ["--prefix", "/opt/inkwire"], scratch: scratch)
            #expect(try Self.files(under: root, scratch: scratch) == [])
        }
    }
}

private extension String {
    func replacingOccurrences(_ target: String, _ replacement: String) -> String { replacing(target, with: replacement) }

    func replacingHyphens() -> String { replacing("-", with: "\\-") }
}
