import Foundation
import Testing
@testable import InkStore

/// A real full disk: a 512 KiB tmpfs mounted for the test (needs root), grown afterwards with
/// a remount. Where mounting is not allowed (or INKSTORE_SIMULATE_FULL_DISK is set), SQLite's
/// `max_page_count` stands in for it.
@Suite struct SQLiteDiskFullTests {
    @Test func aFullDiskIsReportedTheStoreGoesOnAndRecovers() throws {
        let directory = makeTemporaryDirectory("inkstore-full")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let simulate = ProcessInfo.processInfo.environment["INKSTORE_SIMULATE_FULL_DISK"] != nil
        let mounted = !simulate && runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=512k", "tmpfs", directory]) == 0
        defer { if mounted && runTool("/bin/umount", [directory]) != 0 { _ = runTool("/bin/umount", ["-l", directory]) } }
        let path = directory + "/" + SQLiteRoomLogStore.fileName
        var options = SQLiteRoomLogStore.Options()
        options.limits.maxPendingOps = 64
        if !mounted {
            print("SQLiteDiskFullTests: cannot mount a tmpfs here; simulating with max_page_count")
            options.maxPageCount = 64
        }
        do {
            let store = try SQLiteRoomLogStore(path: path, options: options)
            defer { store.close() }
            try DiskFullScenario.run(store: store, payloadBytes: 3000, grow: {
                // max_page_count belongs to the writer's connection: only a reopen lifts it.
                guard mounted else { return false }
                return runTool("/bin/mount", ["-o", "remount,size=16m", directory]) == 0
            })
        }
        options.maxPageCount = nil
        let reopened = try SQLiteRoomLogStore(path: path, options: options)
        defer { reopened.close() }
        try DiskFullScenario.verify(store: reopened)
    }
}

/// Runs a program, returning its exit status (-1 when it cannot start).
func runTool(_ executable: String, _ arguments: [String]) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
}
