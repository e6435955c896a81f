import Foundation
import Glibc
import InkVersion
import Testing
@testable import InkDaemon

/// `inkwire`'s command-line conventions: help and version everywhere, `--flag=value`, and host
/// names in `--server` resolved by the system resolver (IPv4 and IPv6).
@Suite struct ClientCommandLineTests {
    static let commands = ["send", "watch", "export", "codec", "demo-trace"]

    @Test func helpAndVersionExitZeroEverywhere() throws {
        let directory = DaemonProcess.scratchDirectory("cli-help")
        defer { _ = system("rm -rf '\(directory)'") }
        let version = try ClientProcess.run(["--version"], directory: directory)
        #expect(version.exitStatus == 0 && version.output == "inkwire \(InkwireVersion.string) (commit \(InkwireVersion.commit))\n")
        for spelling in [["-h"], ["--help"], ["help"]] {
            let help = try ClientProcess.run(spelling, directory: directory)
            #expect(help.exitStatus == 0, "\(spelling)")
            for command in Self.commands { #expect(help.output.contains("  \(command) "), "\(spelling) lists \(command)") }
        }
        for command in Self.commands {
            let own = try ClientProcess.run([command, "--help"], directory: directory)
            #expect(own.exitStatus == 0 && own.output.hasPrefix("usage: inkwire \(command)"), "\(command): \(own.output)")
            #expect(try ClientProcess.run([command, "-h"], directory: directory).output == own.output)
            #expect(try ClientProcess.run(["help", command], directory: directory).output == own.output)
            #expect(try ClientProcess.run([command, "--version"], directory: directory).output == version.output)
        }
        let unknown = try ClientProcess.run(["draw"], directory: directory)
        #expect(unknown.exitStatus == ClientExitCodes.badArguments && unknown.errors.contains("unknown command 'draw'"))
        let option = try ClientProcess.run(["watch", "--server", "udp://127.0.0.1:1", "--room", "r", "--colour", "red"], directory: directory)
        #expect(option.exitStatus == ClientExitCodes.badArguments && option.errors.contains("unknown option --colour"), "\(option.errors)")
    }

    @Test func flagEqualsValueIsFlagValue() throws {
        let directory = DaemonProcess.scratchDirectory("cli-equals")
        defer { _ = system("rm -rf '\(directory)'") }
        let spaced = try ClientProcess.run(["demo-trace", "--seconds", "3", "--seed", "7"], directory: directory)
        let joined = try ClientProcess.run(["demo-trace", "--seconds=3", "--seed=7"], directory: directory)
        #expect(spaced.exitStatus == 0 && joined.exitStatus == 0)
        #expect(spaced.output == joined.output && !spaced.output.isEmpty)
        // The same seed, the same lesson; another seed, another one.
        #expect(try ClientProcess.run(["demo-trace", "--seconds=3", "--seed=8"], directory: directory).output != spaced.output)
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off"], tag: "cli-equals")
        let udp = try daemon.ready()["udp"]!
        writeFile(directory + "/lesson.csv", Array(spaced.output.utf8))
        let sent = try ClientProcess.run(["send", "--server=udp://\(udp)", "--room=r", "--user=t", "--trace=\(directory)/lesson.csv", "--speed=50"],
                                         directory: directory)
        #expect(sent.exitStatus == 0, "\(sent.errors)")
    }

    /// Runs `inkwire arguments` in a mount namespace whose /etc/hosts is `hosts`, so the system
    /// resolver answers for made-up names; nil without root or `unshare`.
    static func runWithHosts(_ hosts: String, _ arguments: [String], directory: String) throws -> ClientProcess? {
        guard geteuid() == 0, access("/usr/bin/unshare", X_OK) == 0 else {
            print("ClientCommandLineTests: host names need root and unshare; skipped")
            return nil
        }
        writeFile(directory + "/hosts", Array(hosts.utf8))
        chmod(directory + "/hosts", 0o644)
        let script = "mount --bind \"$0\" /etc/hosts && exec \"$@\""
        return try ClientProcess.run(["--wrapped-by", "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script,
                                      directory + "/hosts", ClientProcess.binaryPath] + arguments, directory: directory)
    }

    @Test func hostNamesResolveToIPv4AndIPv6() throws {
        let directory = DaemonProcess.scratchDirectory("cli-hosts")
        defer { _ = system("rm -rf '\(directory)'") }
        // One daemon per family, each on its own port.
        let v4 = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0"], tag: "cli-hosts")
        let v4Fields = try v4.ready()
        let v6 = try DaemonProcess(["--udp", "[::1]:0", "--tcp", "[::1]:0"], tag: "cli-hosts")
        let v6Fields = try v6.ready()
        let hosts = """
            127.0.0.1 localhost
            127.0.0.1 board-v4.inkwire.test
            ::1 board-v6.inkwire.test
            ::1 board-both.inkwire.test
            127.0.0.1 board-both.inkwire.test

            """
        let cases: [(String, String, DaemonProcess)] = [
            ("udp://board-v4.inkwire.test:\(DaemonProcess.port(v4Fields["udp"])!)", "v4 udp", v4),
            ("tcp://board-v4.inkwire.test:\(DaemonProcess.port(v4Fields["tcp"])!)", "v4 tcp", v4),
            ("udp://board-v6.inkwire.test:\(DaemonProcess.port(v6Fields["udp"])!)", "v6 udp", v6),
            ("tcp://board-v6.inkwire.test:\(DaemonProcess.port(v6Fields["tcp"])!)", "v6 tcp", v6),
            // Both families: ::1 comes first and nobody listens there on the IPv4 daemon's port,
            // so the client moves on to 127.0.0.1.
            ("udp://board-both.inkwire.test:\(DaemonProcess.port(v4Fields["udp"])!)", "both udp", v4),
            ("tcp://board-both.inkwire.test:\(DaemonProcess.port(v4Fields["tcp"])!)", "both tcp", v4),
        ]
        for (server, label, daemon) in cases {
            let user = label.replacingOccurrences(of: " ", with: "-")
            guard let watch = try Self.runWithHosts(hosts, ["watch", "--server", server, "--room", "r", "--user", user, "--idle-exit", "0.2", "--timeout", "3"],
                                                    directory: directory) else { return }
            #expect(watch.exitStatus == 0, "\(label): \(watch.errors)")
            #expect(daemon.waitForLine(containing: "user=\(user) ") != nil, "\(label) did not reach its daemon")
        }
        guard let unknown = try Self.runWithHosts(hosts, ["watch", "--server", "udp://nowhere.inkwire.test:7420", "--room", "r", "--timeout", "1"],
                                                  directory: directory) else { return }
        #expect(unknown.exitStatus == ClientExitCodes.unreachable, "\(unknown.errors)")
        #expect(unknown.errors.contains("getaddrinfo nowhere.inkwire.test"), "\(unknown.errors)")
        let bad = try ClientProcess.run(["watch", "--server", "udp://bad_host!:7420", "--room", "r"], directory: directory)
        #expect(bad.exitStatus == ClientExitCodes.badArguments && bad.errors.contains("HOST must be"), "\(bad.errors)")
    }
}

/// `inkwire`'s exit codes (Sources/inkwire/ClientOptions.swift, `ClientExit`).
enum ClientExitCodes {
    static let unreachable: Int32 = 3
    static let badArguments: Int32 = 2
}
