import Glibc
import InkUV

extension Daemon {
    /// How long peers get to receive their goodbye before connections close.
    static let goodbyeGraceMicroseconds: UInt64 = 200_000

    /// SIGTERM/SIGINT: tell systemd, stop accepting, say goodbye, flush the durable log, exit 0.
    /// A watchdog thread ends the process if this takes longer than `--shutdown-timeout-ms`
    /// (a stuck disk), with exit code 3 so the unit shows the stop was not clean.
    func shutdown(signal: Int32) {
        guard !stopping else { return }
        stopping = true
        notifier.stopping()
        logger.notice("stopping", ["signal": signal == Signal.interrupt ? "SIGINT" : "SIGTERM"])
        ShutdownWatchdog.arm(milliseconds: config.limits.shutdownTimeoutMs)
        for listener in legacyListeners { listener.stopAccepting() }
        for connector in legacyConnectors { connector.stopConnecting() }
        for listener in legacyUploadListeners { listener.stopAccepting() }
        for transport in tcp { transport.stopAccepting() }
        for transport in udp { transport.stopAccepting() }
        for listener in web { listener.stopAccepting() }
        // Acknowledge what is already accepted before saying goodbye, so devices see their
        // last batches confirmed; then every session gets `goingAway` (ARQ sessions linger).
        do { try store.flush() } catch { logger.error("room log flush failed", ["error": error]) }
        storeProgressed()
        driver.shutdown()
        do {
            let grace = try LoopTimer(loop: loop)
            grace.start(afterMicroseconds: Daemon.goodbyeGraceMicroseconds) { [weak self] in self?.finishShutdown() }
        } catch {
            finishShutdown()
        }
    }

    private func finishShutdown() {
        for listener in legacyListeners { listener.closePeers(reason: "daemon stopping") }
        for connector in legacyConnectors { connector.closePeers(reason: "daemon stopping") }
        for listener in legacyUploadListeners { listener.closeUploads(reason: "daemon stopping") }
        for transport in tcp { transport.closeAll(reason: "daemon stopping") }
        for listener in web { listener.closeAll(reason: "daemon stopping") }
        for transport in udp { transport.close() }
        metricsServer?.close()
        bridge?.close()
        notifier.stopWatchdog()
        let started = loop.now
        do {
            try store.flush()
            logger.notice("room log flushed", ["ms": (loop.now - started) / 1000])
        } catch {
            exitCode = 1
            logger.error("room log flush failed", ["error": error])
        }
        store.close()
        logger.notice("stopped")
        loop.closeAll()
        loop.stop()
    }
}

/// Ends the process from a separate thread if shutdown hangs (a blocked disk).
enum ShutdownWatchdog {
    /// Exit code when the graceful stop ran out of time.
    static let timedOutExitCode: Int32 = 3

    static func arm(milliseconds: UInt64) {
        var thread = pthread_t()
        let context = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
        context.initialize(to: milliseconds)
        let rc = pthread_create(&thread, nil, { raw in
            let pointer = raw!.assumingMemoryBound(to: UInt64.self)
            let ms = pointer.pointee
            pointer.deallocate()
            var delay = timespec(tv_sec: Int(ms / 1000), tv_nsec: Int(ms % 1000) * 1_000_000)
            var remaining = timespec()
            while nanosleep(&delay, &remaining) != 0 && errno == EINTR { delay = remaining }
            let message = "level=error msg=\"shutdown timed out\"\n"
            _ = message.withCString { write(2, $0, strlen($0)) }
            _exit(ShutdownWatchdog.timedOutExitCode)
        }, context)
        if rc == 0 { pthread_detach(thread) } else { context.deallocate() }
    }
}
