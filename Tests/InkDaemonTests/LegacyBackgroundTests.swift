import Glibc
import InkBenchSupport
import InkCodec
import LegacyAppModel
import Testing

/// Backgrounds and HYWhiteboard app models on the real daemon: a client-mode app uploads an
/// image (its `插入图片`); native watchers, a late joiner and a server-mode app reached with
/// `--legacy-connect` (shown on its upload port) get exactly that image for page 0; a restart
/// of the app and of the daemon keeps it.
@Suite struct LegacyBackgroundTests {
    static func daemon(_ tag: String, dir: String, app: LegacyAppRunner.App) throws -> (DaemonProcess, legacy: UInt16, upload: UInt16, tcp: String) {
        let d = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson", "--legacy-upload", "127.0.0.1:0",
                                   "--legacy-connect", "127.0.0.1:\(app.listeningPort)=lesson", "--legacy-connect-upload", "\(app.uploadPort)"],
                                  dataDir: dir, tag: tag)
        let fields = try d.ready()
        let upload = DaemonProcess.port(fields["legacy_upload"])!
        return (d, d.legacyPort(fields), upload, "tcp://" + fields["tcp"]!)
    }

    @Test func aLegacyUploadIsShownOnAServerModeAppWatchersAndALateJoinerAndSurvivesRestarts() throws {
        let dir = DaemonProcess.scratchDirectory("bg-legacy-display")
        defer { removeTree(dir) }
        let runner = LegacyAppRunner(seed: 31)
        let server = try runner.listen("server-app", uploadPort: 0, configuration: LegacyApps.configuration(31))
        var (d, legacy, upload, tcp) = try Self.daemon("bg-legacy-display", dir: dir, app: server)
        let watcher = try ClientProcess(["watch", "--server", tcp, "--room", "lesson", "--user", "early", "--format", "json", "--idle-exit", "3",
                                         "--backgrounds-dir", dir], directory: dir)
        let teacher = try runner.connect("teacher", port: legacy, configuration: LegacyApps.configuration(32))
        #expect(runner.run(limitMicroseconds: 10_000_000) { teacher.model.takesImages && server.isConnected })

        // The teacher's app uploads its photo (to the host it draws with, port 57777) and shows it.
        let jpeg = BackgroundEndToEndTests.photo(seed: 31, width: 800, height: 600)
        #expect(try runner.insertImage(teacher, image: jpeg, port: upload))
        #expect(runner.run(limitMicroseconds: 15_000_000) { server.model.background?.bytes == jpeg && !teacher.isUploading }, "\(server)\n\(d.log)")
        #expect(teacher.model.background?.bytes == jpeg, "the uploading app shows its own image")
        #expect(server.model.background == HYImage(bytes: jpeg, width: 800, height: 600), "\(server)")
        #expect(server.uploads.lengthMismatches == 0 && server.uploadConnections.allSatisfy { $0.crash == nil })
        #expect(d.log.contains("msg=\"background shown on the legacy app\""), "\(d.log)")
        let name = BackgroundEndToEndTests.hex(jpeg)
        #expect(watcher.wait() == 0, "\(watcher.errors)")
        #expect(readFile(dir + "/\(name).jpg") == jpeg, "the native watcher got exactly the image")
        #expect(watcher.output.contains("\"cmd\":\"background\",\"page\":0,\"image\":\"\(name)\",\"width\":800,\"height\":600"))
        let late = try BackgroundEndToEndTests.watch(tcp, dir: dir, name: "late", room: "lesson")
        #expect(late.exitStatus == 0, "\(late.errors)")
        #expect(readFile(dir + "/late/\(name).jpg") == jpeg, "a late joiner gets it")

        // The server-mode app restarts: its new screen is white, and is shown the image again.
        try runner.restart(server)
        #expect(server.model.background == nil)
        #expect(runner.run(limitMicroseconds: 20_000_000) { server.model.background?.bytes == jpeg }, "\(server)")

        // The daemon restarts: it keeps the image, connects to the app again (a new screen) and
        // shows it there; a late joiner gets it from the restarted daemon.
        d.signal(SIGTERM)
        #expect(d.waitExit() == 0)
        let screens = server.sessions.count
        (d, legacy, upload, tcp) = try Self.daemon("bg-legacy-display", dir: dir, app: server)
        #expect(runner.run(limitMicroseconds: 20_000_000) { server.sessions.count > screens && server.model.background?.bytes == jpeg }, "\(server)\n\(d.log)")
        let after = try BackgroundEndToEndTests.watch(tcp, dir: dir, name: "after-restart", room: "lesson")
        #expect(after.exitStatus == 0, "\(after.errors)")
        #expect(readFile(dir + "/after-restart/\(name).jpg") == jpeg, "the restarted daemon keeps it")
        #expect(server.model.desync == nil && server.uploadConnections.allSatisfy { $0.crash == nil }, "\(server)")
        d.signal(SIGTERM)
        _ = d.waitExit()
    }
}
