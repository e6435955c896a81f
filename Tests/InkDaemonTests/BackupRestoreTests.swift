import Glibc
import InkCodec
@testable import InkStore
import InkVersion
import Testing
@testable import InkDaemon

/// `inkwired backup` and `restore`, the copy before a schema migration and the refusal of a
/// newer schema, with the real daemon and client.
@Suite struct BackupRestoreTests {
    /// Runs `inkwired arguments` (a command, not the daemon) to completion: exit code, stdout and stderr.
    static func inkwired(_ arguments: [String], in directory: String) throws -> (code: Int32?, output: String) {
        try DeployTests.run([DaemonProcess.binaryPath] + arguments, scratch: directory)
    }

    /// `inkwire demo-trace --seconds N` into `directory/lesson.csv`; its lines.
    static func demoTrace(in directory: String, seconds: Int) throws -> (path: String, lines: [String]) {
        let made = try ClientProcess.run(["demo-trace", "--seconds", String(seconds)], directory: directory)
        #expect(made.exitStatus == 0, "\(made.errors)")
        let path = directory + "/lesson.csv"
        writeFile(path, readFile(made.outPath))
        return (path, made.outputLines)
    }

    /// The board digest `inkwire watch` reports after syncing `room`, and the author of its first command.
    static func syncedDigest(_ server: String, room: String, in directory: String) throws -> (digest: String, author: UInt32?) {
        let watch = try ClientProcess.run(["watch", "--server", server, "--room", room, "--format", "json", "--idle-exit", "0.5"], directory: directory)
        #expect(watch.exitStatus == 0, "\(watch.errors)")
        let line = try #require(watch.errors.split(separator: "\n").first { $0.contains("board digest") }, "\(watch.errors)")
        #expect(line.contains("matches the server"), "\(line)")
        let digest = String(line.split(separator: " ").drop { $0 != "digest" }.dropFirst().first ?? "")
        let author = watch.outputLines.first.flatMap { first in
            first.split(separator: ",").first { $0.hasPrefix("\"author\":") }.flatMap { UInt32($0.dropFirst("\"author\":".count)) }
        }
        return (digest, author)
    }

    /// The digest of `lines` drawn by `author` (what the room's board must fold to).
    static func digest(of lines: [String], author: UInt32) throws -> String {
        var translator = LegacyTranslator(author: AuthorID(author))
        var board = Board()
        let parsed = try Trace.parse(Array(lines.map { $0 + "\n" }.joined().utf8))
        board.apply(Batch(author: AuthorID(author), commands: parsed.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }))
        return String(board.digest, radix: 16)
    }

    /// Turns a current room log into what release 0.1.0 wrote: schema 1, no application id.
    static func makeSchema1(_ path: String) throws {
        try SQLiteConnection(path: path).exec("DROP TABLE schema_history; DROP TABLE blobs; PRAGMA application_id = 0; PRAGMA user_version = 1;")
    }

    /// The names in `directory`, sorted ([] when it does not exist).
    static func files(_ directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    static func start(_ dataDir: String, tag: String) throws -> (DaemonProcess, udp: String, tcp: String) {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--retain", "full", "--data-dir", dataDir], tag: tag)
        let fields = try daemon.ready()
        return (daemon, "udp://" + fields["udp"]!, "tcp://" + fields["tcp"]!)
    }

    @Test func aBackupTakenWhileALessonIsWrittenRestoresTheBoardOfThatMoment() throws {
        let scratch = DaemonProcess.scratchDirectory("backup-live")
        defer { _ = system("rm -rf '\(scratch)'") }
        let trace = try Self.demoTrace(in: scratch, seconds: 90)
        let (live, udp, tcp) = try Self.start(scratch + "/live", tag: "backup-live")
        let sender = try ClientProcess(["send", "--server", udp, "--room", "maths", "--user", "teacher", "--trace", trace.path, "--speed", "12"],
                                       directory: scratch)
        // Backups while the sender's batches are being committed.
        var backups: [String] = []
        var attempts = 0
        while sender.exitStatus == nil && backups.count < 6 {
            usleep(900_000)
            attempts += 1
            let path = scratch + "/during-\(attempts).sqlite"
            let (code, output) = try Self.inkwired(["backup", "--data-dir", scratch + "/live", "--to", path], in: scratch)
            #expect(code == 0, "\(output)")
            // On a loaded machine the first copies may come before the sender's first batch.
            if code == 0 && !output.contains(" 0 batches") { backups.append(path) }
            _ = sender.wait(limitMicroseconds: 1)
        }
        #expect(sender.wait() == 0, "\(sender.errors)")
        let final = scratch + "/after.sqlite"
        #expect(try Self.inkwired(["backup", "--data-dir=\(scratch)/live", "--to=\(final)"], in: scratch).code == 0)
        let liveBoard = try Self.syncedDigest(tcp, room: "maths", in: scratch)
        let author = try #require(liveBoard.author)
        #expect(liveBoard.digest == (try Self.digest(of: trace.lines, author: author)))

        var partial = 0
        for (index, backup) in (backups + [final]).enumerated() {
            // Restored into a data directory of its own, served by a second daemon.
            let dataDir = scratch + "/restored-\(index)"
            _ = FileSystem.makeDirectories(dataDir)
            let (code, output) = try Self.inkwired(["restore", "--data-dir", dataDir, "--from", backup], in: scratch)
            #expect(code == 0, "\(output)")
            let (restored, _, restoredTCP) = try Self.start(dataDir, tag: "backup-restored")
            let exported = try ClientProcess.run(["export", "--server", restoredTCP, "--room", "maths"], directory: scratch)
            let lines = exported.outputLines
            // The room as it was at the backup: a prefix of the lesson, whose board digest is the
            // one the restored daemon serves.
            #expect(lines.count > 0 && lines == Array(trace.lines.prefix(lines.count)), "backup \(index): \(lines.count) lines")
            let board = try Self.syncedDigest(restoredTCP, room: "maths", in: scratch)
            #expect(board.digest == (try Self.digest(of: lines, author: author)), "backup \(index)")
            if lines.count < trace.lines.count { partial += 1 }
            if backup == final {
                #expect(lines == trace.lines)
                #expect(board.digest == liveBoard.digest, "the restored room's board is the live one")
            }
            restored.signal(SIGTERM)
            #expect(restored.waitExit() == 0)
        }
        #expect(partial >= 1, "no backup was taken while the lesson was being written")
        live.signal(SIGTERM)
        #expect(live.waitExit() == 0)
    }

    @Test func restoreWaitsForTheDaemonToStopAndKeepsTheLogItReplaces() throws {
        let scratch = DaemonProcess.scratchDirectory("restore")
        defer { _ = system("rm -rf '\(scratch)'") }
        let trace = try Self.demoTrace(in: scratch, seconds: 5)
        let dataDir = scratch + "/data"
        let (daemon, udp, _) = try Self.start(dataDir, tag: "restore")
        #expect(try ClientProcess.run(["send", "--server", udp, "--room", "first", "--trace", trace.path, "--speed", "50"], directory: scratch).exitStatus == 0)
        let backup = scratch + "/first.sqlite"
        #expect(try Self.inkwired(["backup", "--data-dir", dataDir, "--to", backup], in: scratch).code == 0)
        // The file exists: refused, nothing overwritten.
        let (again, againOutput) = try Self.inkwired(["backup", "--data-dir", dataDir, "--to", backup], in: scratch)
        #expect(again == DaemonExit.startFailed && againOutput.contains("the file exists"), "\(againOutput)")
        #expect(try ClientProcess.run(["send", "--server", udp, "--room", "second", "--trace", trace.path, "--speed", "50"], directory: scratch).exitStatus == 0)
        // While the daemon runs, restore refuses and changes nothing.
        let (running, runningOutput) = try Self.inkwired(["restore", "--data-dir", dataDir, "--from", backup], in: scratch)
        #expect(running == DaemonExit.startFailed, "\(runningOutput)")
        #expect(runningOutput.contains("stop the daemon first"), "\(runningOutput)")
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)
        let (restored, output) = try Self.inkwired(["restore", "--data-dir", dataDir, "--from", backup], in: scratch)
        #expect(restored == 0, "\(output)")
        #expect(output.contains("1 rooms") && output.contains("schema \(SQLiteSchema.currentVersion)"), "\(output)")
        let store = try SQLiteRoomLogStore(path: dataDir + "/rooms.sqlite")
        #expect(store.rooms().map(\.name) == ["first"])
        store.close()
        let kept = try #require(Self.files(dataDir + "/backups").first { $0.hasPrefix("rooms-before-restore-") })
        let previous = try SQLiteRoomLogStore(path: dataDir + "/backups/" + kept)
        #expect(previous.rooms().map(\.name) == ["first", "second"])
        previous.close()
    }

    @Test func twoDaemonsNeverShareADataDirectory() throws {
        let scratch = DaemonProcess.scratchDirectory("lock")
        defer { _ = system("rm -rf '\(scratch)'") }
        let (first, _, _) = try Self.start(scratch + "/data", tag: "lock")
        let second = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off", "--data-dir", scratch + "/data"], tag: "lock")
        #expect(second.waitExit() == DaemonExit.startFailed)
        #expect(second.log.contains("another inkwired uses"), "\(second.log)")
        first.signal(SIGTERM)
        #expect(first.waitExit() == 0)
    }

    @Test func aSchema1RoomLogIsCopiedThenMigratedOnceByTheDaemon() throws {
        let scratch = DaemonProcess.scratchDirectory("migrate")
        defer { _ = system("rm -rf '\(scratch)'") }
        let trace = try Self.demoTrace(in: scratch, seconds: 5)
        let dataDir = scratch + "/data"
        let (before, udp, tcp) = try Self.start(dataDir, tag: "migrate")
        for room in ["maths", "art"] {
            #expect(try ClientProcess.run(["send", "--server", udp, "--room", room, "--trace", trace.path, "--speed", "50"], directory: scratch).exitStatus == 0)
        }
        let digest = try Self.syncedDigest(tcp, room: "maths", in: scratch).digest
        before.signal(SIGTERM)
        #expect(before.waitExit() == 0)
        // What 0.1.0 left: schema 1.
        try Self.makeSchema1(dataDir + "/rooms.sqlite")
        let (after, _, afterTCP) = try Self.start(dataDir, tag: "migrate")
        let line = try #require(after.waitForLine(containing: "msg=\"room log migrated; the copy taken before is kept\""))
        let fields = parseLogfmt(line)
        #expect(fields["from_schema"] == "1" && fields["to_schema"] == String(SQLiteSchema.currentVersion), "\(line)")
        let copy = try #require(fields["backup"])
        #expect(copy.hasPrefix(dataDir + "/backups/rooms-schema1-"), "\(line)")
        let summary = try RoomLogBackup.inspect(copy)
        #expect(summary.schemaVersion == 1 && summary.rooms == 2)
        // Every room came through: the same board.
        #expect(try Self.syncedDigest(afterTCP, room: "maths", in: scratch).digest == digest)
        #expect(try ClientProcess.run(["export", "--server", afterTCP, "--room", "art"], directory: scratch).outputLines == trace.lines)
        after.signal(SIGTERM)
        #expect(after.waitExit() == 0)
        // Once: the next start migrates nothing and copies nothing.
        let (third, _, _) = try Self.start(dataDir, tag: "migrate")
        #expect(!third.log.contains("room log migrated"))
        #expect(Self.files(dataDir + "/backups").count == 1)
        third.signal(SIGTERM)
        #expect(third.waitExit() == 0)
    }

    @Test func aRoomLogFromANewerReleaseIsRefusedUntouched() throws {
        let scratch = DaemonProcess.scratchDirectory("downgrade")
        defer { _ = system("rm -rf '\(scratch)'") }
        let dataDir = scratch + "/data"
        let (daemon, _, _) = try Self.start(dataDir, tag: "downgrade")
        daemon.signal(SIGTERM)
        #expect(daemon.waitExit() == 0)
        let newer = SQLiteSchema.currentVersion + 1
        try SQLiteConnection(path: dataDir + "/rooms.sqlite").exec("PRAGMA user_version = \(newer)")
        let bytes = readFile(dataDir + "/rooms.sqlite")
        let refused = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "off", "--data-dir", dataDir], tag: "downgrade")
        #expect(refused.waitExit() == DaemonExit.dataRefused)
        #expect(refused.log.contains("has schema \(newer), written by a newer inkwired; this one (\(InkwireVersion.string)) reads schema \(SQLiteSchema.currentVersion) and older"),
                "\(refused.log)")
        #expect(refused.log.contains("inkwired restore"))
        #expect(readFile(dataDir + "/rooms.sqlite") == bytes)
        #expect(!Self.files(dataDir).contains("backups"))
        // Its backup cannot be restored by this release either.
        let copy = scratch + "/newer.sqlite"
        #expect(try Self.inkwired(["backup", "--data-dir", dataDir, "--to", copy], in: scratch).code == 0)
        let (code, output) = try Self.inkwired(["restore", "--data-dir", scratch + "/other", "--from", copy], in: scratch)
        #expect(code == DaemonExit.dataRefused && output.contains("from a newer inkwired"), "\(output)")
    }

    @Test func backupAndRestoreFollowTheCommandLineConventions() throws {
        let scratch = DaemonProcess.scratchDirectory("backup-cli")
        defer { _ = system("rm -rf '\(scratch)'") }
        for command in ["backup", "restore"] {
            for spelling in ["-h", "--help"] {
                let (code, output) = try Self.inkwired([command, spelling], in: scratch)
                #expect(code == 0 && output.hasPrefix("inkwired \(command) --"), "\(output)")
            }
            let (version, versionOutput) = try Self.inkwired([command, "--version"], in: scratch)
            #expect(version == 0 && versionOutput == "inkwired \(InkwireVersion.string) (commit \(InkwireVersion.commit))\n")
            let (missing, missingOutput) = try Self.inkwired([command, "--data-dir", scratch], in: scratch)
            #expect(missing == DaemonExit.badConfiguration && missingOutput.contains("is required"), "\(missingOutput)")
            let (unknown, _) = try Self.inkwired([command, "--to", "x", "--from", "y", "--frobnicate"], in: scratch)
            #expect(unknown == DaemonExit.badConfiguration)
        }
        // No room log there, or a file that is not one.
        let (none, noneOutput) = try Self.inkwired(["backup", "--data-dir", scratch + "/empty", "--to", scratch + "/x.sqlite"], in: scratch)
        #expect(none == DaemonExit.startFailed && noneOutput.contains("no room log there"), "\(noneOutput)")
        writeFile(scratch + "/junk.sqlite", Array("not a database at all, just text".utf8))
        let (junk, junkOutput) = try Self.inkwired(["restore", "--data-dir", scratch + "/data", "--from", scratch + "/junk.sqlite"], in: scratch)
        #expect(junk == DaemonExit.dataRefused, "\(junkOutput)")
        #expect(!Self.files(scratch + "/data").contains("rooms.sqlite"))
    }
}
