import Glibc
import InkBenchSupport
import InkCodec
import InkProtocol
import LegacyAppModel

/// The HYWhiteboard app model (written from the app's source) against the real daemon: every
/// legacy end-to-end test drives apps with it and compares their screens.
enum LegacyApps {
    /// Lines of ../shared/traces/lesson-a.csv (nil when the shared traces are absent: tests skip).
    static let lesson: [TraceLine]? = {
        let root = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/"))
        for candidate in ["/../shared/traces/lesson-a.csv", "/../../shared/traces/lesson-a.csv"] {
            let bytes = readFile(root + candidate)
            if !bytes.isEmpty { return try? Trace.parse(bytes) }
        }
        print("legacy end-to-end tests: ../shared/traces/lesson-a.csv not found; skipped")
        return nil
    }()

    /// The lesson from `fromMs` to `toMs`, cut after the last stroke that ends before `toMs`.
    static func slice(_ fromMs: UInt64, _ toMs: UInt64) -> [TraceLine]? {
        guard let all = lesson else { return nil }
        var lines = all.filter { $0.timeMs >= fromMs && $0.timeMs < toMs }
        if let end = lines.lastIndex(where: { if case .point(_, _, _, .end) = $0.message { true } else { false } }) {
            lines = Array(lines[...end])
        }
        return lines
    }

    /// A daemon with one legacy listener (room "lesson") and native listeners.
    static func daemon(_ tag: String, extra: [String] = []) throws -> (DaemonProcess, legacy: UInt16, udp: String) {
        let d = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--legacy", "127.0.0.1:0=lesson"] + extra, tag: tag)
        let fields = try d.ready()
        return (d, d.legacyPort(fields), "udp://" + fields["udp"]!)
    }

    /// App timing for tests: the app's screen comes up within 0.3 s.
    static func configuration(_ seed: UInt64, livenessMs: UInt64 = 9000) -> HYWhiteboardApp.Configuration {
        var c = HYWhiteboardApp.Configuration()
        c.screenLoadDelay = .milliseconds(100 + seed % 200)
        c.livenessInterval = .milliseconds(livenessMs)
        return c
    }

    /// Waits until every app's screen equals `expected` (or the limit); true when they do.
    static func waitScreens(_ runner: LegacyAppRunner, _ apps: [LegacyAppRunner.App], equal expected: LegacyAppScreen,
                            limitMicroseconds: UInt64 = 20_000_000) -> Bool {
        runner.run(limitMicroseconds: limitMicroseconds) { apps.allSatisfy { $0.model.screen == expected } }
    }

    /// A script for `lines` starting `delayMs` from now at `speed`.
    static func script(_ lines: [TraceLine], runner: LegacyAppRunner, delayMs: UInt64 = 200, speed: Double = 1) -> LegacyTraceScript {
        LegacyTraceScript(lines, start: runner.now + .milliseconds(delayMs), speed: speed)
    }

    /// The trace's lines written to a file for `inkwire send --trace`.
    static func writeTrace(_ lines: [TraceLine], to path: String) {
        writeFile(path, Trace.format(lines))
    }
}

extension LegacyApps {
    /// Trace lines for legacy texts, one sample (17 ms) apart.
    static func lines(_ texts: [String]) -> [TraceLine] {
        texts.enumerated().map { TraceLine(timeMs: UInt64($0.offset) * 17, message: try! LegacyMessage(parsing: $0.element)) }
    }

    /// The app's user performs `texts` (points, pens, 4/5/6 buttons) now; returns once they are
    /// done and the app's buffer went out (its 60 ms timer).
    static func draw(_ texts: [String], on app: LegacyAppRunner.App, _ runner: LegacyAppRunner) {
        app.script = LegacyTraceScript(lines(texts), start: runner.now + .milliseconds(10))
        runner.run(limitMicroseconds: 5_000_000) { app.script?.isDone == true }
        runner.run(limitMicroseconds: 150_000)
    }

    /// The screen an app shows after its own user drew `texts` (and nothing else).
    static func screen(_ texts: [String]) -> LegacyAppScreen {
        LegacyTraceScript.referenceScreen(lines(texts))
    }

    /// Runs until every app in `apps` is connected with its screen up.
    static func waitUp(_ runner: LegacyAppRunner, _ apps: [LegacyAppRunner.App]) -> Bool {
        runner.run(limitMicroseconds: 10_000_000) { apps.allSatisfy { $0.isConnected && $0.model.isScreenUp } }
    }
}
