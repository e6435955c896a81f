extension Daemon {
    /// SIGHUP: parses the start's flags and environment again with the `--config` file as it is
    /// now (a line removed from it goes back to its default), re-reads the token secret, and applies what
    /// can change live (token secret, log level, limits and quotas, room history limit and idle expiry) without touching a session. A broken
    /// configuration is logged and the running one kept.
    func reload() {
        guard !stopping else { return }
        notifier.reloading()
        metrics.reloads.increment()
        defer { notifier.ready(status: statusText()) }
        let next: DaemonConfig
        let verifier: TokenVerifier?
        do {
            next = try DaemonConfig.parse(arguments: arguments, environment: environment, readFile: FileSystem.readText)
            verifier = try Daemon.loadTokenVerifier(next)
        } catch {
            metrics.errors(kind: "reload").increment()
            logger.error("reload failed; keeping the running configuration", ["error": error])
            return
        }
        let restartOnly = restartOnlyChanges(from: config, to: next)
        if !restartOnly.isEmpty {
            logger.warning("reload ignores settings that need a restart", ["settings": restartOnly.joined(separator: ",")])
        }
        let secretChanged = tokenVerifier != verifier
        tokenVerifier = verifier
        authorizer.verifier = verifier
        logger.level = next.logLevel
        config.logLevel = next.logLevel
        config.tokenSecretFile = next.tokenSecretFile
        var limits = next.limits
        limits.shutdownTimeoutMs = config.limits.shutdownTimeoutMs
        config.limits = limits
        legacyContext.apply(limits)
        driver.apply(limits)
        tcpRetransmitPolicy.ceilingMs = limits.tcpRetransmitCeilingMs
        config.maxRoomHistoryBytes = next.maxRoomHistoryBytes
        config.roomIdleExpiryMs = next.roomIdleExpiryMs
        store.applyLiveLimits(maxRoomHistoryBytes: next.maxRoomHistoryBytes, idleRoomExpiryMs: next.roomIdleExpiryMs)
        driver.gate.maxRoomHistoryBytes = next.maxRoomHistoryBytes
        // A session's right ends with its token (docs/protocol.md 8.3).
        if secretChanged { driver.authorizationChanged() }
        logger.notice("reloaded", ["log_level": next.logLevel, "tokens": verifier == nil ? "open" : "required",
                                   "max_sessions": limits.maxSessions, "new_sessions_per_second": limits.newSessionsPerSecond,
                                   "max_rooms": limits.maxRooms, "max_members": limits.maxMembersPerRoom,
                                   "max_sessions_per_user": limits.maxSessionsPerUser, "max_sessions_per_address": limits.maxSessionsPerAddress,
                                   "max_legacy_per_address": limits.maxLegacyPerAddress, "member_reserve": limits.memberReserve,
                                   "member_timeout_ms": limits.memberTimeoutMs, "member_idle_after_ms": limits.memberIdleMs,
                                   "rooms_per_address_per_minute": limits.roomsPerAddressPerMinute,
                                   "empty_room_expiry_ms": limits.emptyRoomExpiryMs,
                                   "max_room_history_bytes": next.maxRoomHistoryBytes,
                                   "room_idle_expiry_ms": next.roomIdleExpiryMs])
    }

    private func restartOnlyChanges(from old: DaemonConfig, to new: DaemonConfig) -> [String] {
        var changed: [String] = []
        if old.udp != new.udp { changed.append("udp") }
        if old.tcp != new.tcp { changed.append("tcp") }
        if old.legacy != new.legacy { changed.append("legacy") }
        if old.legacyConnect != new.legacyConnect { changed.append("legacy-connect") }
        if old.legacyConnectUploadPort != new.legacyConnectUploadPort { changed.append("legacy-connect-upload") }
        if old.dataDir != new.dataDir { changed.append("data-dir") }
        if old.durability != new.durability { changed.append("durability") }
        if old.retain != new.retain { changed.append("retain") }
        if old.metrics != new.metrics { changed.append("metrics") }
        if old.web != new.web { changed.append("web") }
        if old.webCertFile != new.webCertFile || old.webKeyFile != new.webKeyFile { changed.append("web-cert-file") }
        if old.webOrigins != new.webOrigins { changed.append("web-origin") }
        if old.limits.shutdownTimeoutMs != new.limits.shutdownTimeoutMs { changed.append("shutdown-timeout-ms") }
        return changed
    }
}
