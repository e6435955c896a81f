import Testing
import Glibc
import InkUV
@testable import InkDaemon

@Suite(.serialized) struct SystemdNotifierTests {
    @Test(arguments: [false, true])
    func sendsEachNotification(abstract: Bool) throws {
        let manager = FakeNotifySocket(abstract: abstract, tag: "notify-\(abstract)")
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": manager.address])
        #expect(notifier.isEnabled)
        #expect(notifier.ready() == .sent)
        #expect(manager.receive() == "READY=1")
        #expect(notifier.ready(status: "2 rooms, 5 members") == .sent)
        #expect(manager.receive() == "READY=1\nSTATUS=2 rooms, 5 members")
        #expect(notifier.status("line one\nREADY=1") == .sent)
        #expect(manager.receive() == "STATUS=line one READY=1")
        #expect(notifier.watchdog() == .sent)
        #expect(manager.receive() == "WATCHDOG=1")
        #expect(notifier.reloading() == .sent)
        let reloading = try #require(manager.receive())
        #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
        #expect(UInt64(reloading.dropFirst("RELOADING=1\nMONOTONIC_USEC=".count)) != nil)
        #expect(notifier.stopping() == .sent)
        #expect(manager.receive() == "STOPPING=1")
        #expect(manager.receive() == nil)
    }

    @Test func longStatusIsCut() {
        let manager = FakeNotifySocket(abstract: true, tag: "long")
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": manager.address])
        notifier.status(String(repeating: "x", count: 5000))
        #expect(manager.receive() == "STATUS=" + String(repeating: "x", count: SystemdNotifier.maximumStatusBytes))
    }

    @Test func disabledWithoutNotifySocket() throws {
        let notifier = SystemdNotifier(environment: ["WATCHDOG_USEC": "1000000"])
        #expect(!notifier.isEnabled)
        #expect(notifier.ready() == .disabled)
        #expect(notifier.stopping() == .disabled)
        let loop = try EventLoop()
        defer { loop.shutdown() }
        #expect(try notifier.startWatchdog(loop: loop) == false)
        #expect(loop.openHandleCount == 0)
    }

    @Test func unreachableSocketIsReportedNotFatal() {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/inkwire/notify"])
        guard case .failed(let reason) = notifier.ready() else {
            Issue.record("sent to a missing socket")
            return
        }
        #expect(reason.contains("No such file"))
        let tooLong = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/" + String(repeating: "a", count: 200)])
        #expect(tooLong.ready() != .sent)
    }

    @Test(arguments: [
        (["WATCHDOG_USEC": "10000000"], UInt64(10_000_000)),
        (["WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "4242"], UInt64(10_000_000)),
        (["WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "1"], nil),
        (["WATCHDOG_USEC": "0"], nil),
        (["WATCHDOG_USEC": "-5"], nil),
        (["WATCHDOG_USEC": "10s"], nil),
        ([:], nil),
    ] as [([String: String], UInt64?)])
    func parsesWatchdogInterval(environment: [String: String], expected: UInt64?) {
        #expect(SystemdNotifier.watchdogInterval(environment: environment, pid: 4242) == expected)
        let notifier = SystemdNotifier(environment: environment, pid: 4242)
        #expect(notifier.watchdogPingInterval == expected.map { $0 / 2 })
    }

    /// WATCHDOG=1 arrives from the event loop at half the interval.
    @Test func watchdogPingsAtHalfTheInterval() throws {
        let manager = FakeNotifySocket(abstract: true, tag: "watchdog")
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": manager.address, "WATCHDOG_USEC": "40000"])
        #expect(notifier.watchdogPingInterval == 20_000)
        var outcomes: [SystemdNotifier.Outcome] = []
        let started = loop.now
        #expect(try notifier.startWatchdog(loop: loop) { outcomes.append($0) })
        var pings: [String] = []
        let poll = try Poll(loop: loop, fd: manager.fd)
        try poll.start(.readable) { _, _ in
            while let message = manager.receive() { pings.append(message) }
        }
        #expect(drive(loop) { pings.count >= 3 })
        let elapsed = loop.now - started
        notifier.stopWatchdog()
        poll.close()
        #expect(pings.prefix(3) == ["WATCHDOG=1", "WATCHDOG=1", "WATCHDOG=1"])
        #expect(outcomes.prefix(3) == [.sent, .sent, .sent])
        // Three pings at a 20 ms period cannot come sooner than 60 ms after the start, less the
        // libuv loop clock's lag (whole ms, cached since the last loop round; more under load).
        #expect(elapsed + 5_000 >= 60_000, "pings too early: \(elapsed)us")
        loop.runNoWait()
        #expect(loop.openHandleCount == 0)
    }
}
