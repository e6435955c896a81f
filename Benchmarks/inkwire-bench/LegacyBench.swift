// inkwire-bench legacy: what HYWhiteboard apps get. A 20-minute lesson's board to a late-joining
// app model (its real reader, 1030-byte reads, random read pacing) in seeded virtual-time runs,
// LegacySession side by side with the single burst inkwired wrote before; and 40 app models on
// one room of the real inkwired, some drawing, the rest watching.
import Glibc
import InkBenchSupport
import InkCodec
import InkLegacy
import InkProtocol
import InkSim
import LegacyAppModel

struct LegacyBenchOptions {
    var mode = "all"
    /// The late joiner's board: "whole" (every stroke of the lesson, its clears left out: the
    /// largest board 20 minutes of drawing make) or "end" (the board when the lesson ends).
    var board = "whole"
    var runs = 1000
    var tracePath = "../shared/traces/lesson-a.csv"
    var apps = 40
    var drawers = 4
    var durationSeconds = 60
    var seed: UInt64 = 1

    init(_ arguments: [String]) throws(LegacyBenchUsage) {
        var i = 0
        func value() throws(LegacyBenchUsage) -> String {
            guard i + 1 < arguments.count else { throw LegacyBenchUsage(message: "\(arguments[i]) needs a value") }
            i += 1
            return arguments[i]
        }
        func number(_ text: String) throws(LegacyBenchUsage) -> Int {
            guard let n = Int(text), n > 0 else { throw LegacyBenchUsage(message: "\(arguments[i - 1]): a positive number") }
            return n
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--mode": mode = try value()
            case "--board": board = try value()
            case "--runs": runs = try number(try value())
            case "--trace": tracePath = try value()
            case "--apps": apps = try number(try value())
            case "--drawers": drawers = try number(try value())
            case "--duration": durationSeconds = try number(try value())
            case "--seed": seed = UInt64(try number(try value()))
            default: throw LegacyBenchUsage(message: "unknown option \(arguments[i])")
            }
            i += 1
        }
        guard ["all", "late-join", "live"].contains(mode) else { throw LegacyBenchUsage(message: "--mode: all, late-join or live") }
        guard ["whole", "end"].contains(board) else { throw LegacyBenchUsage(message: "--board: whole or end") }
        guard drawers < apps else { throw LegacyBenchUsage(message: "--drawers must be fewer than --apps") }
    }
}

struct LegacyBenchUsage: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

func runLegacyBench(_ arguments: [String]) -> Never {
    let options: LegacyBenchOptions
    do { options = try LegacyBenchOptions(arguments) } catch {
        print("inkwire-bench legacy: \(error)")
        print("usage: inkwire-bench legacy [--mode all|late-join|live] [--board whole|end] [--runs 1000] [--trace PATH] [--apps 40] [--drawers 4] [--duration 60] [--seed 1]")
        exit(2)
    }
    guard let text = FanoutDaemon.read(options.tracePath), let lines = try? Trace.parse(Array(text.utf8)) else {
        print("inkwire-bench legacy: cannot read the trace \(options.tracePath)")
        exit(2)
    }
    var ok = true
    if options.mode != "live" { ok = runLateJoin(options, lines: lines) && ok }
    if options.mode != "late-join" { ok = runLegacyLive(options, lines: lines) && ok }
    exit(ok ? 0 : 1)
}

// MARK: late join

/// One late join: how the app fared.
struct LateJoinResult {
    var desynced = false
    var dropped = false
    var equal = false
    /// Virtual ms from the connection to the app's last read of the board.
    var completeMs = 0.0
    var bytes = 0
}

/// The link and the app's reading, as `LegacyRoomSimulation` models them: what is written
/// reaches the app's socket after the latency, the app reads at most 1030 bytes after a pause
/// (up to 3 ms, 2 % of reads stalled up to 80 ms), at most 64 KiB unread.
struct PacedReader {
    var rng: SimRandom
    var now = Instant.zero
    mutating func pause() -> Instant.Duration {
        if rng.below(100) < 2 { return Instant.Duration(microseconds: rng.below(80_001)) }
        return Instant.Duration(microseconds: rng.below(3_001))
    }
}

func lateJoinOnce(board: Board, expected: LegacyAppScreen, seed: UInt64, burst: [UInt8]?) -> LateJoinResult {
    var rng = SimRandom(seed: seed)
    var appConfig = HYWhiteboardApp.Configuration()
    appConfig.screenLoadDelay = Instant.Duration(microseconds: rng.below(400_001))
    appConfig.livenessInterval = rng.below(2) == 0 ? .milliseconds(7000) : .milliseconds(9000)
    let app = HYWhiteboardApp(configuration: appConfig)
    var reader = PacedReader(rng: SimRandom(seed: seed &* 0x9E37_79B9))
    // Bytes in the app's socket not read yet: `buffer[readAt...]`.
    var buffer: [UInt8] = []
    var readAt = 0
    var unread: Int { buffer.count - readAt }
    var written = 0
    let latency = Instant.Duration.milliseconds(1)
    app.handleConnected(now: .zero)
    var result = LateJoinResult()
    var lastRead = Instant.zero
    var session: LegacySession?
    if let burst {
        buffer = burst  // written at once when the app connected
        written = burst.count
    } else {
        let s = LegacySession(now: .zero)
        s.handleJoined(author: AuthorID(9999), board: board, now: .zero)
        session = s
    }
    var inFlight: [(at: Instant, bytes: [UInt8])] = []
    var now = Instant.zero
    let limit = Instant.milliseconds(120_000)
    while now < limit {
        // The session writes whatever the window takes now.
        if let s = session {
            while unread + inFlight.count * LegacySessionLimits.chunkBytes + LegacySessionLimits.chunkBytes <= 64 * 1024,
                  let chunk = s.pollTransmit(now: now) {
                inFlight.append((now + latency, chunk))
                written += chunk.count
            }
            while let w = app.pollWrite() { s.handleBytes(w, now: now + latency) }
        } else {
            while app.pollWrite() != nil {}
        }
        while let f = inFlight.first, f.at <= now { buffer += f.bytes; inFlight.removeFirst() }
        if unread > 0 {
            let n = min(HYReceiver.readBytes, unread)
            app.handleRead(Array(buffer[readAt..<(readAt + n)]), now: now)
            readAt += n
            if readAt == buffer.count { buffer.removeAll(keepingCapacity: true); readAt = 0 }
            lastRead = now
        }
        if let t = app.pollTimeout(), t <= now { app.handleTimeout(now: now) }
        if let s = session, let t = s.pollTimeout(), t <= now { s.handleTimeout(now: now) }
        guard app.state == .connected else { result.dropped = true; break }
        let idle = unread == 0 && inFlight.isEmpty
        if idle && (session == nil || now > .milliseconds(2000)) && (session?.pollTransmit(now: now).map { c -> Bool in inFlight.append((now + latency, c)); written += c.count; return true } ?? false) == false {
            if session == nil || app.screen == expected || now.since(lastRead) > .milliseconds(5000) { break }
        }
        // Next event: a read after the app's pause, or the next arrival / deadline.
        var next = now + reader.pause()
        if unread == 0 {
            next = [inFlight.first?.at, app.pollTimeout(), session?.pollTimeout()].compactMap { $0 }.min() ?? (now + .milliseconds(10))
            next = max(next, now + Instant.Duration(microseconds: 1))
        }
        now = next
    }
    result.desynced = app.desync != nil
    result.equal = app.screen == expected
    result.completeMs = Double(lastRead.microseconds) / 1000
    result.bytes = written
    return result
}

/// The board written as inkwired wrote it before: a clear, then every visible stroke with the
/// pen styles it needs, frames back to back, in one burst when the app connected.
func singleBurst(_ board: Board) -> [UInt8] {
    var out: [UInt8] = []
    LegacyFrame.text(.clear).append(to: &out)
    var pen = PenStyle.initial
    for stroke in board.visibleStrokes(on: .first) where !stroke.points.isEmpty {
        if stroke.style != pen {
            LegacyFrame.text(.penStyle(stroke.style)).append(to: &out)
            pen = stroke.style
        }
        let last = stroke.points.count - 1
        for (i, p) in stroke.points.enumerated() {
            let phase: StrokePhase = i == 0 ? .start : (i == last && stroke.isEnded ? .end : .move)
            LegacyFrame.text(.point(tool: stroke.tool, x: p.x, y: p.y, phase: phase)).append(to: &out)
        }
    }
    return out
}

private func legacyPercentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

private func legacyFixed(_ v: Double, _ digits: Int) -> String {
    var s = String(Int((v * pow(10, Double(digits))).rounded()))
    if digits > 0 {
        while s.count <= digits { s = "0" + s }
        s.insert(".", at: s.index(s.endIndex, offsetBy: -digits))
    }
    return s
}

func runLateJoin(_ options: LegacyBenchOptions, lines: [TraceLine]) -> Bool {
    var translator = LegacyTranslator(author: AuthorID(1))
    var board = Board()
    for line in lines {
        if options.board == "whole", case .clear = line.message { continue }
        board.apply(translator.command(from: line.message), author: AuthorID(1))
    }
    let expected = LegacyAppScreen.expected(from: board, page: .first)[AuthorID(1)] ?? LegacyAppScreen()
    let burst = singleBurst(board)
    var table: [String] = []
    var ok = true
    for variant in ["chunks", "burst"] {
        var results: [LateJoinResult] = []
        let started = EventLoopClock.microseconds()
        for run in 0..<options.runs {
            results.append(lateJoinOnce(board: board, expected: expected, seed: options.seed &+ UInt64(run), burst: variant == "burst" ? burst : nil))
        }
        let desyncs = results.filter(\.desynced).count
        let dropped = results.filter(\.dropped).count
        let equal = results.filter(\.equal).count
        let times = results.map(\.completeMs)
        let bytes = results.map { Double($0.bytes) }
        let name = variant == "chunks" ? "LegacySession (1030-byte chunks)" : "single burst (before)"
        print("{\"bench\":\"legacy-late-join\",\"board\":\"\(options.board)\",\"variant\":\"\(variant)\",\"runs\":\(options.runs),\"board_strokes\":\(board.visibleStrokes(on: .first).count),"
              + "\"board_lines\":\(expected.lines.count),\"desyncs\":\(desyncs),\"dropped\":\(dropped),\"screens_equal\":\(equal),"
              + "\"complete_ms_p50\":\(legacyFixed(legacyPercentile(times, 0.5), 1)),\"complete_ms_p95\":\(legacyFixed(legacyPercentile(times, 0.95), 1)),"
              + "\"complete_ms_max\":\(legacyFixed(times.max() ?? 0, 1)),\"bytes_median\":\(Int(legacyPercentile(bytes, 0.5))),"
              + "\"wall_seconds\":\(legacyFixed(Double(EventLoopClock.microseconds() - started) / 1e6, 1))}")
        table.append("| \(name) | \(options.runs) | \(desyncs) | \(dropped) | \(equal) | \(legacyFixed(legacyPercentile(times, 0.5) / 1000, 2)) / \(legacyFixed(legacyPercentile(times, 0.95) / 1000, 2)) / \(legacyFixed((times.max() ?? 0) / 1000, 2)) | \(Int(legacyPercentile(bytes, 0.5))) |")
        if variant == "chunks" && (desyncs > 0 || equal != options.runs) { ok = false }
    }
    print("")
    print("| late join, board \(options.board) (\(board.visibleStrokes(on: .first).count) strokes) | runs | desyncs | dropped | screens equal | to the last read p50 / p95 / max s (virtual) | bytes to the app |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in table { print(row) }
    print("")
    return ok
}

// MARK: live

func runLegacyLive(_ options: LegacyBenchOptions, lines: [TraceLine]) -> Bool {
    let daemon: FanoutDaemon
    do {
        daemon = try FanoutDaemon(sessions: options.apps, rooms: 1, members: options.apps, extraArguments: ["--legacy", "127.0.0.1:0=live"])
    } catch {
        print("inkwire-bench legacy: \(error)")
        return false
    }
    defer { daemon.stop() }
    guard let log = FanoutDaemon.read(daemon.logPath), let port = legacyPort(log) else {
        print("inkwire-bench legacy: no legacy port in the daemon's ready line")
        return false
    }
    let runner = LegacyAppRunner(seed: options.seed)
    var apps: [LegacyAppRunner.App] = []
    do {
        for i in 0..<options.apps {
            var config = HYWhiteboardApp.Configuration()
            config.screenLoadDelay = .milliseconds(100 + UInt64(i) * 7 % 300)
            let app = try runner.connect(i < options.drawers ? "drawer-\(i)" : "watcher-\(i)", port: port, configuration: config)
            app.model.recordsLineEnds = true
            apps.append(app)
        }
    } catch {
        print("inkwire-bench legacy: \(error)")
        return false
    }
    // Each drawer performs its own part of the lesson at real speed, all at once.
    let spanMs = UInt64(options.durationSeconds) * 1000
    let total = lines.last?.timeMs ?? 0
    for d in 0..<options.drawers {
        let from = total / UInt64(options.drawers) * UInt64(d)
        let part = lines.filter { $0.timeMs >= from && $0.timeMs < from + spanMs }
        let cut = part.lastIndex { if case .point(_, _, _, .end) = $0.message { true } else { false } } ?? -1
        apps[d].script = LegacyTraceScript(Array(part[...cut]), start: runner.now + .milliseconds(1500 + UInt64(d) * 37))
    }
    let cpuStart = daemon.cpuSeconds
    let started = EventLoopClock.microseconds()
    runner.run(limitMicroseconds: spanMs * 1000 + 3_000_000) { apps.prefix(options.drawers).allSatisfy { $0.script?.isDone == true } }
    runner.run(limitMicroseconds: 5_000_000)
    let seconds = Double(EventLoopClock.microseconds() - started) / 1e6
    let cpu = (daemon.cpuSeconds - cpuStart) / seconds * 100
    // When each drawer lifted its pen, by the line's first point.
    var ends: [LegacyAppScreen.Point: Instant] = [:]
    for d in 0..<options.drawers { for e in apps[d].model.lineEnds where !e.received { ends[e.first] = e.at } }
    var p99s: [Double] = []
    var p50s: [Double] = []
    var all: [Double] = []
    // Lines lifted less than `quietAfterInput` (1 s) after the member received a clear, and shown
    // after it: the session holds new lines that long after a clear it wrote (LegacySession).
    var afterClear: [Double] = []
    var rest: [Double] = []
    var watchers: [Double] = []
    var desyncs = 0
    var ignored = 0
    var touches = 0
    for (i, app) in apps.enumerated() {
        if app.model.desync != nil || !app.isConnected { desyncs += 1 }
        if i < options.drawers {
            ignored += app.model.touchesIgnored
            touches += app.model.touchesAccepted + app.model.touchesIgnored
        }
        var latencies: [Double] = []
        let hold = LegacySessionConfiguration().quietAfterInput
        var seen = Set<LegacyAppScreen.Point>()  // a line drawn again (a repaint) counts once, when first shown
        for e in app.model.lineEnds where e.received {
            guard let lifted = ends[e.first], e.at >= lifted, seen.insert(e.first).inserted else { continue }
            let ms = Double(e.at.microseconds - lifted.microseconds) / 1000
            latencies.append(ms)
            if app.model.clearsReceived.contains(where: { $0 <= e.at && lifted < $0 + hold }) { afterClear.append(ms) } else { rest.append(ms) }
            if i >= options.drawers { watchers.append(ms) }
        }
        all += latencies
        let p50 = legacyPercentile(latencies, 0.5), p99 = legacyPercentile(latencies, 0.99)
        p50s.append(p50)
        p99s.append(p99)
        print("{\"bench\":\"legacy-live\",\"member\":\"\(app.name)\",\"lines_shown\":\(latencies.count),\"end_to_shown_ms_p50\":\(legacyFixed(p50, 1)),"
              + "\"end_to_shown_ms_p99\":\(legacyFixed(p99, 1)),\"desync\":\(app.model.desync == nil ? "false" : "true"),\"connected\":\(app.isConnected),"
              + "\"touches_ignored\":\(app.model.touchesIgnored)}")
    }
    print("{\"bench\":\"legacy-live\",\"apps\":\(options.apps),\"drawers\":\(options.drawers),\"seconds\":\(legacyFixed(seconds, 1)),\"desyncs\":\(desyncs),"
          + "\"end_to_shown_ms_p50\":\(legacyFixed(legacyPercentile(all, 0.5), 1)),\"end_to_shown_ms_p99\":\(legacyFixed(legacyPercentile(all, 0.99), 1)),"
          + "\"member_p99_ms_min\":\(legacyFixed(p99s.min() ?? 0, 1)),\"member_p99_ms_median\":\(legacyFixed(legacyPercentile(p99s, 0.5), 1)),\"member_p99_ms_max\":\(legacyFixed(p99s.max() ?? 0, 1)),"
          + "\"after_clear_lines\":\(afterClear.count),\"after_clear_ms_p50\":\(legacyFixed(legacyPercentile(afterClear, 0.5), 1)),"
          + "\"other_lines\":\(rest.count),\"other_ms_p50\":\(legacyFixed(legacyPercentile(rest, 0.5), 1)),\"other_ms_p99\":\(legacyFixed(legacyPercentile(rest, 0.99), 1)),"
          + "\"watchers_ms_p50\":\(legacyFixed(legacyPercentile(watchers, 0.5), 1)),\"watchers_ms_p99\":\(legacyFixed(legacyPercentile(watchers, 0.99), 1)),"
          + "\"drawer_touches_ignored\":\(ignored),\"drawer_touches\":\(touches),\"daemon_cpu_percent\":\(legacyFixed(cpu, 1)),\"daemon_rss_mb\":\(legacyFixed(daemon.peakRSSMegabytes, 1))}")
    print("")
    print("| live: apps, drawing | desyncs | lifted pen -> line on a member p50 / p99 ms (all) | per-member p99 min / median / max ms | drawers' touches ignored | daemon CPU % | RSS MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("| \(options.apps), \(options.drawers) | \(desyncs) | \(legacyFixed(legacyPercentile(all, 0.5), 1)) / \(legacyFixed(legacyPercentile(all, 0.99), 1)) | "
          + "\(legacyFixed(p99s.min() ?? 0, 1)) / \(legacyFixed(legacyPercentile(p99s, 0.5), 1)) / \(legacyFixed(p99s.max() ?? 0, 1)) | \(ignored) of \(touches) | \(legacyFixed(cpu, 1)) | \(legacyFixed(daemon.peakRSSMegabytes, 1)) |")
    print("")
    print("| lines (all members) | count | p50 ms | p90 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (name, values) in [("all", all), ("lifted < 1 s after the member got a clear", afterClear), ("the others", rest), ("on watchers (never drawing)", watchers)] {
        print("| \(name) | \(values.count) | \(legacyFixed(legacyPercentile(values, 0.5), 1)) | \(legacyFixed(legacyPercentile(values, 0.9), 1)) | "
              + "\(legacyFixed(legacyPercentile(values, 0.99), 1)) | \(legacyFixed(values.max() ?? 0, 1)) |")
    }
    return desyncs == 0
}

/// The port of `legacy="127.0.0.1:PORT=ROOM"` in the ready line.
func legacyPort(_ log: String) -> UInt16? {
    for line in log.split(separator: "\n") where line.contains("msg=\"ready\"") {
        guard let range = line.range(of: " legacy=\"") else { continue }
        let value = line[range.upperBound...].prefix { $0 != "=" }
        return value.split(separator: ":").last.flatMap { UInt16($0) }
    }
    return nil
}
