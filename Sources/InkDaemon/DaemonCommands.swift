import Glibc
import InkStore
import InkVersion

/// `inkwired backup` and `inkwired restore`: the room log of the data directory that the usual
/// options name (`--data-dir`, `--config`, `INKWIRE_DATA_DIR`), copied with SQLite's online backup.
enum DaemonCommand: String, CaseIterable {
    case backup
    case restore

    /// The command's own option (`--to` or `--from`) and its help.
    var option: (name: String, value: String, help: String) {
        switch self {
        case .backup: ("to", "FILE", "copy the room log into FILE (which must not exist) while the daemon runs: SQLite's online backup, checked and fsynced")
        case .restore: ("from", "FILE", "with the daemon stopped, put the backup FILE in place of the room log; the current one is first copied to DATA_DIR/backups")
        }
    }

    var usage: String { "inkwired \(rawValue) --\(option.name) \(option.value) [--data-dir DIR | --config FILE]" }

    var helpText: String {
        """
        \(usage)
          \(option.help).
          The data directory is found as the daemon finds it: --data-dir, INKWIRE_DATA_DIR, then the --config file
          (the service: sudo inkwired \(rawValue) --\(option.name) \(option.value) --data-dir /var/lib/inkwired).
        Exit codes: 0 done, 1 failed (I/O, \(self == .restore ? "the daemon is running, " : "")no room log), 2 bad arguments,
          65 not an Inkwire room log, or one from a newer release.

        """
    }

    func run(_ arguments: [String], environment: [String: String]) -> Int32 {
        var target: String?
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "-h" || argument == "--help" {
                print(helpText, terminator: "")
                return DaemonExit.ok
            }
            if argument == "--version" {
                print("inkwired \(InkwireVersion.string) (commit \(InkwireVersion.commit))")
                return DaemonExit.ok
            }
            if argument == "--\(option.name)" {
                guard index < arguments.count else { return usageError("--\(option.name) needs a value \(option.value)") }
                target = arguments[index]
                index += 1
            } else if argument.hasPrefix("--\(option.name)=") {
                target = String(argument.dropFirst(option.name.count + 3))
            } else {
                rest.append(argument)
            }
        }
        guard let target, !target.isEmpty else { return usageError("--\(option.name) \(option.value) is required") }
        let config: DaemonConfig
        do {
            config = try DaemonConfig.parse(arguments: rest, environment: environment, readFile: FileSystem.readText)
        } catch {
            return usageError("\(error)")
        }
        let database = config.dataDir + "/" + SQLiteRoomLogStore.fileName
        do throws(StoreError) {
            switch self {
            case .backup:
                let summary = try RoomLogBackup.copy(databaseAt: database, to: target)
                print("inkwired backup: \(database) -> \(target): \(describe(summary))")
            case .restore:
                if let problem = FileSystem.makeDirectories(config.dataDir) {
                    throw StoreError.storage(code: 10, message: problem, context: "creating \(config.dataDir)")
                }
                let lock: DataDirectoryLock
                switch DataDirectoryLock.acquire(dataDir: config.dataDir) {
                case .success(let held): lock = held
                case .failure(let error):
                    DaemonMain.printError("inkwired restore: \(error); stop the daemon first (systemctl stop inkwired)")
                    return DaemonExit.startFailed
                }
                defer { withExtendedLifetime(lock) {} }
                let backups = SQLiteRoomLogStore.defaultBackupDirectory(forDatabaseAt: database)
                if let problem = FileSystem.makeDirectories(backups) { throw StoreError.storage(code: 10, message: problem, context: "creating \(backups)") }
                let previous = backups + "/rooms-before-restore-\(RoomLogBackup.utcStamp(WallClock.milliseconds())).sqlite"
                let summary = try RoomLogBackup.restore(from: target, to: database, keepingPreviousAs: previous)
                print("inkwired restore: \(target) -> \(database): \(describe(summary))"
                      + (access(previous, F_OK) == 0 ? "; the room log it replaced is kept as \(previous)" : ""))
            }
            return DaemonExit.ok
        } catch {
            DaemonMain.printError("inkwired \(rawValue): \(error)")
            switch error {
            case .schemaTooNew(let found, let supported):
                DaemonMain.printError("inkwired \(rawValue): schema \(found) is from a newer inkwired; this one (\(InkwireVersion.string)) reads schema \(supported) and older")
                return DaemonExit.dataRefused
            case .storage(let code, _, _) where code & 0xff == 26 || code & 0xff == 11:  // SQLITE_NOTADB, SQLITE_CORRUPT
                return DaemonExit.dataRefused
            default:
                return DaemonExit.startFailed
            }
        }
    }

    private func describe(_ summary: RoomLogBackup.Summary) -> String {
        "\(summary.rooms) rooms, \(summary.batches) batches, \(summary.snapshots) snapshots, \(summary.bytes) bytes, schema \(summary.schemaVersion)"
    }

    private func usageError(_ text: String) -> Int32 {
        DaemonMain.printError("inkwired \(rawValue): \(text)\nusage: \(usage) (see inkwired \(rawValue) --help)")
        return DaemonExit.badConfiguration
    }
}
