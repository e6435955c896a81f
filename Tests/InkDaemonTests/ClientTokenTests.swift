import Foundation
import Glibc
import Testing
@testable import InkDaemon

/// `inkwire token` mints what the daemon verifies; `inkwire` takes a token from `--token-file`
/// or `INKWIRE_TOKEN`, so it never has to be on a command line (`ps`).
@Suite struct ClientTokenTests {
    static let vector = "iw1.bWF0aHMKdGVhY2hlcgp0ZWFjaGVyCjE5MDAwMDAwMDA.2clxQVQI2YlITXjcOKQYwdUFOwQ3vqYSXghxdhXrEn0"

    static func scratch(_ tag: String, secret: String = "0123456789abcdef\n") -> String {
        let directory = DaemonProcess.scratchDirectory(tag)
        writeFile(directory + "/secret", Array(secret.utf8))
        return directory
    }

    @Test func mintsTheSpecsVectorExactly() throws {
        let directory = Self.scratch("token-vector")
        defer { _ = system("rm -rf '\(directory)'") }
        let minted = try ClientProcess.run(["token", "--secret-file", directory + "/secret", "--room", "maths", "--user", "teacher",
                                            "--role", "teacher", "--expires=1900000000"], directory: directory)
        #expect(minted.exitStatus == 0, "\(minted.errors)")
        #expect(minted.output == Self.vector + "\n")
        #expect(minted.errors == "")
    }

    @Test func aTTLCountsFromNow() throws {
        let directory = Self.scratch("token-ttl", secret: "a-school-secret-of-enough-bytes")
        defer { _ = system("rm -rf '\(directory)'") }
        let before = UInt64(time(nil))
        let minted = try ClientProcess.run(["token", "--secret-file", directory + "/secret", "--room", "maths 4b", "--user", "ada",
                                            "--role", "presenter", "--ttl", "2h"], directory: directory)
        let after = UInt64(time(nil))
        #expect(minted.exitStatus == 0, "\(minted.errors)")
        let token = Array(minted.output.dropLast().utf8)
        let verifier = TokenVerifier(secret: Array("a-school-secret-of-enough-bytes".utf8))!
        guard case .success(let claims) = verifier.verify(token, room: "maths 4b", user: "ada", role: .viewer, nowSeconds: after) else {
            Issue.record("\(minted.output)")
            return
        }
        #expect(claims.role == .presenter)
        #expect(claims.expiresAt >= before + 7200 && claims.expiresAt <= after + 7200)
        #expect(TokenLifetime.parse("90") == 90 && TokenLifetime.parse("15m") == 900 && TokenLifetime.parse("7d") == 604_800)
        #expect(TokenLifetime.parse("366d") == 366 * 86_400 && TokenLifetime.parse("367d") == nil)
        for bad in ["", "0", "0h", "2w", "h", "-5m", "+5m", "1.5h", "99999999999999s", "２h"] { #expect(TokenLifetime.parse(bad) == nil, "\(bad)") }
    }

    @Test(arguments: [
        (["--room", "r", "--user", "u", "--role", "viewer", "--ttl", "1h"], 2, "inkwire token: --secret-file is required"),
        (["--secret-file", "SECRET", "--user", "u", "--role", "viewer", "--ttl", "1h"], 2, "inkwire token: --room is required"),
        (["--secret-file", "SECRET", "--room", "r", "--user", "u", "--ttl", "1h"], 2, "inkwire token: --role is required (teacher, presenter or viewer)"),
        (["--secret-file", "SECRET", "--room", "r", "--user", "u", "--role", "admin", "--ttl", "1h"], 2,
         "inkwire token: --role must be teacher, presenter or viewer, not 'admin'"),
        (["--secret-file", "SECRET", "--room", "r", "--user", "u", "--role", "viewer"], 2, "inkwire token: --ttl DURATION or --expires UNIX_SECONDS is required"),
        (["--secret-file", "SECRET", "--room", "r", "--user", "u", "--role", "viewer", "--ttl", "1h", "--expires", "5"], 2,
         "inkwire token: --ttl and --expires exclude each other"),
        (["--secret-file", "SECRET", "--room", "r", "--user", "u", "--role", "viewer", "--ttl", "400d"], 2,
         "inkwire token: --ttl '400d': expected a duration like 90s, 15m, 2h or 7d, from 1s to 366d"),
        (["--secret-file", "SECRET", "--room", "r", "--user", "u", "--role", "viewer", "--expires", "soon"], 2,
         "inkwire token: --expires 'soon': expected unix seconds (a whole number, e.g. 1900000000)"),
        (["--secret-file", "SECRET", "--room", "r\nteacher", "--user", "u", "--role", "viewer", "--ttl", "1h"], 2,
         "inkwire token: --room must be 1 to 64 bytes without control characters"),
        (["--secret-file", "SECRET", "--room", "r", "--user", String(repeating: "u", count: 65), "--role", "viewer", "--ttl", "1h"], 2,
         "inkwire token: --user must be 1 to 64 bytes without control characters"),
        (["--secret-file", "SHORT", "--room", "r", "--user", "u", "--role", "viewer", "--ttl", "1h"], 1,
         "inkwire token: --secret-file SHORT: the secret must be 16 to 4096 bytes, found 5"),
        (["--secret-file", "MISSING", "--room", "r", "--user", "u", "--role", "viewer", "--ttl", "1h"], 1,
         "inkwire token: --secret-file MISSING: cannot read the file (or it is larger than 4096 bytes)"),
        (["--secret-file", "SECRET", "--room", "r", "--user", "u", "--role", "viewer", "--ttl", "1h", "--token", "x"], 2,
         "inkwire token: unknown option --token"),
    ])
    func badArgumentsSayWhy(_ arguments: [String], _ exit: Int32, _ message: String) throws {
        let directory = Self.scratch("token-args")
        defer { _ = system("rm -rf '\(directory)'") }
        writeFile(directory + "/short", Array("short\n".utf8))
        let paths = ["SECRET": directory + "/secret", "SHORT": directory + "/short", "MISSING": directory + "/missing"]
        let resolved = arguments.map { paths[$0] ?? $0 }
        let run = try ClientProcess.run(["token"] + resolved, directory: directory)
        #expect(run.exitStatus == exit)
        #expect(run.output == "")
        let expected = paths.reduce(message) { $0.replacingOccurrences(of: $1.key, with: $1.value) }
        #expect(run.errors.split(separator: "\n").first.map(String.init) == expected, "\(run.errors)")
    }

    @Test func tokensComeFromAFileOrTheEnvironmentAndStayOutOfPS() throws {
        let directory = Self.scratch("token-sources", secret: "a-school-secret-of-enough-bytes\n")
        defer { _ = system("rm -rf '\(directory)'") }
        let d = try ClientEndToEndTests.start("token-sources", extra: ["--token-secret-file", directory + "/secret"])
        let minted = try ClientProcess.run(["token", "--secret-file", directory + "/secret", "--room", "r", "--user", "ada",
                                            "--role", "viewer", "--ttl", "10m"], directory: directory)
        #expect(minted.exitStatus == 0, "\(minted.errors)")
        let token = String(minted.output.dropLast())
        writeFile(directory + "/token", Array(minted.output.utf8))
        writeFile(directory + "/crlf-token", Array((token + "\r\n").utf8))
        writeFile(directory + "/other-token", Array("iw1.bogus.bogus\n".utf8))
        writeFile(directory + "/empty-token", Array("\n".utf8))
        let watch = ["watch", "--server", d.udp, "--room", "r", "--user", "ada", "--idle-exit", "1"]

        // From the file: joined, and the token is nowhere in the process's command line.
        let fromFile = try ClientProcess(watch + ["--token-file", directory + "/token"], directory: directory)
        usleep(300_000)
        let commandLine = String(decoding: readFile("/proc/\(fromFile.pid)/cmdline").map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
        #expect(commandLine.contains("--token-file") && !commandLine.contains(token) && !commandLine.contains("iw1."), "\(commandLine)")
        #expect(fromFile.wait() == 0, "\(fromFile.errors)")
        let crlf = try ClientProcess.run(watch + ["--token-file=" + directory + "/crlf-token"], directory: directory)
        #expect(crlf.exitStatus == 0, "\(crlf.errors)")
        // From the environment.
        let fromEnvironment = try ClientProcess.run(watch, directory: directory, environment: ["INKWIRE_TOKEN": token])
        #expect(fromEnvironment.exitStatus == 0, "\(fromEnvironment.errors)")
        // A flag wins over the environment; a wrong token is refused by the daemon.
        let flagWins = try ClientProcess.run(watch + ["--token-file", directory + "/other-token"], directory: directory, environment: ["INKWIRE_TOKEN": token])
        #expect(flagWins.exitStatus == 4)
        #expect(flagWins.errors.contains("join refused (badToken)"), "\(flagWins.errors)")
        let none = try ClientProcess.run(watch, directory: directory)
        #expect(none.exitStatus == 4, "\(none.errors)")

        // Bad sources are usage errors, before any connection.
        let both = try ClientProcess.run(watch + ["--token", token, "--token-file", directory + "/token"], directory: directory)
        #expect(both.exitStatus == 2)
        #expect(both.errors.hasPrefix("inkwire watch: --token and --token-file exclude each other\n"), "\(both.errors)")
        let missing = try ClientProcess.run(watch + ["--token-file", directory + "/missing"], directory: directory)
        #expect(missing.exitStatus == 2)
        #expect(missing.errors.hasPrefix("inkwire watch: --token-file \(directory)/missing: cannot read the file (or it is larger than 1024 bytes)\n"), "\(missing.errors)")
        let empty = try ClientProcess.run(watch + ["--token-file", directory + "/empty-token"], directory: directory)
        #expect(empty.exitStatus == 2)
        #expect(empty.errors.hasPrefix("inkwire watch: --token-file \(directory)/empty-token: the first line must be the token (1 to 1024 bytes of text)\n"), "\(empty.errors)")
        writeFile(directory + "/huge-token", Array(repeating: UInt8(ascii: "a"), count: 5000))
        let huge = try ClientProcess.run(watch + ["--token-file", directory + "/huge-token"], directory: directory)
        #expect(huge.exitStatus == 2, "\(huge.errors)")
        let longEnvironment = try ClientProcess.run(watch, directory: directory, environment: ["INKWIRE_TOKEN": String(repeating: "a", count: 1025)])
        #expect(longEnvironment.exitStatus == 2)
        #expect(longEnvironment.errors.hasPrefix("inkwire watch: INKWIRE_TOKEN is longer than 1024 bytes\n"), "\(longEnvironment.errors)")
    }

    @Test func tokenHasItsOwnHelp() throws {
        let directory = DaemonProcess.scratchDirectory("token-help")
        defer { _ = system("rm -rf '\(directory)'") }
        for arguments in [["token", "--help"], ["token", "-h"], ["help", "token"]] {
            let help = try ClientProcess.run(arguments, directory: directory)
            #expect(help.exitStatus == 0)
            #expect(help.output.hasPrefix("usage: inkwire token --secret-file FILE --room NAME --user NAME --role ROLE (--ttl DURATION | --expires UNIX_SECONDS)\n"),
                    "\(help.output)")
            #expect(help.output.contains("--token-file FILE or INKWIRE_TOKEN"))
        }
        let main = try ClientProcess.run(["--help"], directory: directory)
        #expect(main.output.contains("  token       mint a join token with the daemon's token secret\n"), "\(main.output)")
        let watch = try ClientProcess.run(["watch", "--help"], directory: directory)
        #expect(watch.output.contains("--token-file FILE join token (the file's first line)"), "\(watch.output)")
    }
}
