import Testing
@testable import InkDaemon

@Suite struct LoggerTests {
    final class Lines { var all: [String] = [] }

    func logger(_ level: LogLevel = .info, journal: Bool = false) -> (Logger, Lines) {
        let lines = Lines()
        return (Logger(level: level, journal: journal, sink: { lines.all.append($0) }), lines)
    }

    @Test func oneLogfmtLinePerEvent() {
        let (log, lines) = logger()
        log.info("listening", ["udp": "127.0.0.1:9000", "rooms": 3])
        log.warning("peer dropped", ["peer": "[::1]:5000", "reason": "silent for 9 s", "empty": ""])
        #expect(lines.all == [
            "level=info msg=\"listening\" udp=127.0.0.1:9000 rooms=3\n",
            "level=warning msg=\"peer dropped\" peer=[::1]:5000 reason=\"silent for 9 s\" empty=\"\"\n",
        ])
    }

    @Test func quotesAndEscapes() {
        let (log, lines) = logger()
        log.error("bad \"frame\"\nnext", ["raw": "a=b", "path": "C:\\x", "tab": "a\tb", "bell": "\u{7}", "key with space": 1])
        #expect(lines.all == [
            #"level=error msg="bad \"frame\"\nnext" raw="a=b" path="C:\\x" tab="a\tb" bell="\u{7}" key_with_space=1"# + "\n",
        ])
    }

    @Test func levelsFilterAndChangeLive() {
        let (log, lines) = logger(.warning)
        log.debug("d")
        log.info("i")
        log.notice("n")
        log.warning("w")
        log.error("e")
        log.level = .debug
        log.debug("d2")
        #expect(lines.all.map { $0.split(separator: " ")[0] } == ["level=warning", "level=error", "level=debug"])
    }

    @Test func journalPrefixesSyslogPriority() {
        let (log, lines) = logger(.debug, journal: true)
        for level in LogLevel.allCases { log.log(level, "x") }
        #expect(lines.all == [
            "<7>level=debug msg=\"x\"\n", "<6>level=info msg=\"x\"\n", "<5>level=notice msg=\"x\"\n",
            "<4>level=warning msg=\"x\"\n", "<3>level=error msg=\"x\"\n",
        ])
    }

    @Test func parsesLevelNames() {
        #expect(LogLevel(parsing: "INFO") == .info)
        #expect(LogLevel(parsing: "warn") == .warning)
        #expect(LogLevel(parsing: "trace") == nil)
        #expect(LogLevel.allCases.allSatisfy { LogLevel(parsing: $0.description) == $0 })
    }

    @Test func journalStreamMustMatchStandardError() {
        #expect(!Logger.stderrIsJournal(environment: [:]))
        #expect(!Logger.stderrIsJournal(environment: ["JOURNAL_STREAM": "garbage"]))
        #expect(!Logger.stderrIsJournal(environment: ["JOURNAL_STREAM": "1:1"]))
    }

    @Test func timestampsAreUTCWithMilliseconds() {
        let lines = Lines()
        let log = Logger(timestamps: true, sink: { lines.all.append($0) })
        log.info("t")
        let line = lines.all.first ?? ""
        #expect(line.hasPrefix("time=20"))
        let stamp = line.dropFirst(5).prefix { $0 != " " }
        #expect(stamp.count == 24 && stamp.hasSuffix("Z"))
    }

    @Test func overlongLinesAreCut() {
        let (log, lines) = logger()
        log.info(String(repeating: "y", count: 40_000))
        #expect(lines.all[0].utf8.count <= Logger.maximumLineBytes + 1)
        #expect(lines.all[0].hasSuffix("...\n"))
    }
}
