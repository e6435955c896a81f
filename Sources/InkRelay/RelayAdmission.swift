// Admission: the quotas that keep one user or one address from filling a room or the daemon,
// the reserve that keeps the teacher in, silent members closed, empty rooms released.
import InkProtocol

extension Relay {
    /// New quotas (a reload): later joins and sweeps follow them; nobody already in is closed
    /// for a lower bound, except by the member timeout as usual.
    public func updateQuotas(_ quotas: RelayQuotas, now: Instant) {
        self.quotas = quotas
        if !quotas.needsSweep { nextSweep = nil }
        scheduleSweep(now: now)
    }

    /// New bounds on rooms held and members per room (a reload): later joins follow them.
    public func updateRoomBounds(maxRooms: Int, maxMembersPerRoom: Int) {
        configuration.limits.maxRooms = max(1, maxRooms)
        configuration.limits.maxMembersPerRoom = max(1, maxMembersPerRoom)
    }

    func scheduleSweep(now: Instant) {
        guard nextSweep == nil, quotas.needsSweep, !sessions.isEmpty || !rooms.isEmpty || !roomCreations.isEmpty else { return }
        nextSweep = now + RelayQuotas.sweepInterval
    }

    // MARK: joins

    /// Whether `session` may create `room`: with open rooms (no token), each address creates at
    /// most `roomsPerAddressPerMinute` (a burst of that many, then one per 60 s / N). A refusal
    /// is sent here.
    func admitRoomCreation(_ session: SessionID, room: String, tokenVerified: Bool, now: Instant) -> Bool {
        let perMinute = UInt64(quotas.roomsPerAddressPerMinute)
        guard perMinute > 0, !tokenVerified, let state = sessions[session], state.transport != .legacy, let source = state.source else {
            return true
        }
        let minute: UInt64 = 60_000_000
        let spacing = max(1, minute / perMinute)
        // Generic cell rate: `due` runs ahead of now by `spacing` per creation; a creation is
        // allowed while it is less than a minute ahead.
        let due = max(roomCreations[source] ?? now, now)
        guard due.microseconds - now.microseconds <= minute - spacing else {
            refuseQuota(session, room: room, .roomsPerAddress, offender: "address \(source)",
                        "address \(source) created \(perMinute) rooms in the last minute; try again in a minute")
            return false
        }
        if roomCreations[source] == nil && roomCreations.count >= RelayQuotas.maxTrackedCreators {
            roomCreations = roomCreations.filter { $0.value > now }
            guard roomCreations.count < RelayQuotas.maxTrackedCreators else {
                refuseQuota(session, room: room, .roomsPerAddress, offender: "address \(source)",
                            "too many addresses are creating rooms; try again in a minute")
                return false
            }
        }
        roomCreations[source] = due + Instant.Duration(microseconds: spacing)
        return true
    }

    /// Whether `session` (asking `role`) may join `room` under the quotas, after closing an
    /// idle member where one must make way. A refusal is sent here.
    ///
    /// 1. The user's sessions in the room: at `maxSessionsPerUser`, its oldest idle one goes.
    /// 2. The address's sessions (legacy ones apart): at the bound the join is refused, unless
    ///    a token grants teacher or presenter.
    /// 3. The room's size: with tokens required, all but `memberReserve` slots for everyone,
    ///    the rest for teacher and presenter tokens; in a room full to the bound such a token
    ///    gets the place of an idle viewer session of its own user, else of the oldest idle
    ///    member without a token (never a teacher's).
    ///
    /// Sessions of the joining device itself (its `origin`) are not counted: they are replaced
    /// once the new session is confirmed.
    func admitMember(_ session: SessionID, request: JoinRequest, tokenVerified: Bool, room: RoomState, now: Instant) -> Bool {
        guard let state = sessions[session] else { return false }
        let user = request.user
        let role = request.role
        let legacy = state.transport == .legacy
        let privileged = tokenVerified && !legacy && role != .viewer
        let present = room.sessions.filter { sessions[$0]?.member?.origin != request.origin }
        if quotas.maxSessionsPerUser > 0 {
            let own = present.filter { sessions[$0]?.member?.user == user }
            if own.count >= quotas.maxSessionsPerUser {
                guard let victim = oldestIdle(own, now: now) else {
                    refuseQuota(session, room: room.name, .sessionsPerUser, offender: "user \(user)",
                                "user \(user) has \(own.count) sessions in this room, the most one user may (none idle)")
                    return false
                }
                evict(victim, room: room, .sessionsPerUser, text: "a newer session of this user took the place of this idle one")
            }
        }
        let addressBound = legacy ? quotas.maxLegacyPerAddress : quotas.maxSessionsPerAddress
        if addressBound > 0, !privileged, let source = state.source {
            let count = present.reduce(0) { n, s in
                guard let other = sessions[s], other.source == source, (other.transport == .legacy) == legacy else { return n }
                return n + 1
            }
            if count >= addressBound {
                refuseQuota(session, room: room.name, legacy ? .legacyPerAddress : .sessionsPerAddress, offender: "address \(source)",
                            "address \(source) has \(count) \(legacy ? "legacy connections" : "sessions") in this room, the most one address may")
                return false
            }
        }
        let bound = limits.maxMembersPerRoom
        let reserve = authorizer.requiresTokens ? min(quotas.memberReserve, bound) : 0
        let capacity = privileged ? bound : bound - reserve
        // An eviction above may have made room already.
        let members = present.filter { sessions[$0] != nil }.count
        guard members >= capacity else { return true }
        if privileged, let victim = reserveVictim(present, user: user, now: now) {
            evict(victim, room: room, .memberReserve, text: "the room is full: this idle session made way for a \(role)")
            return true
        }
        refuseJoin(session, .roomFull, reserve > 0 && !privileged
                   ? "the room has \(members) members (\(reserve) more places are kept for teachers and presenters)"
                   : "the room has \(members) members")
        return false
    }

    /// Whether the member on `session` has not drawn for `idleAfter`.
    func isIdle(_ session: SessionID, now: Instant) -> Bool {
        guard let state = sessions[session], state.member != nil else { return false }
        return now.since(state.lastActed) >= quotas.idleAfter
    }

    /// The idle session among `candidates` that acted longest ago (ties: the oldest session).
    func oldestIdle(_ candidates: [SessionID], now: Instant) -> SessionID? {
        var best: (SessionID, Instant)?
        for s in candidates where isIdle(s, now: now) {
            let acted = sessions[s]!.lastActed
            if best == nil || (acted, s) < (best!.1, best!.0) { best = (s, acted) }
        }
        return best?.0
    }

    /// Who makes way for a teacher or presenter token of `user` in a full room: an idle viewer
    /// session of that user, else the idle member without a token (never a teacher) that acted
    /// longest ago.
    func reserveVictim(_ members: [SessionID], user: String, now: Instant) -> SessionID? {
        let ownViewers = members.filter { sessions[$0]?.member.map { $0.user == user && $0.role == .viewer } ?? false }
        if let victim = oldestIdle(ownViewers, now: now) { return victim }
        let unauthenticated = members.filter { sessions[$0]?.member.map { !$0.authenticated && $0.role != .teacher } ?? false }
        return oldestIdle(unauthenticated, now: now)
    }

    func evict(_ victim: SessionID, room: RoomState, _ quota: RelayQuota, text: String) {
        guard let m = sessions[victim]?.member else { return }
        event(.memberEvicted(room: room.name, session: victim, user: m.user, quota: quota))
        closeSession(victim, .evicted, text: text)
    }

    func refuseQuota(_ session: SessionID, room: String, _ quota: RelayQuota, offender: String, _ text: String) {
        event(.quotaRefused(session: session, room: room, quota: quota, offender: offender))
        refuseJoin(session, .quotaExceeded, text)
    }

    // MARK: the sweep

    /// Closes members silent for `memberTimeout`, releases empty rooms past `emptyRoomExpiry`,
    /// forgets room creations that lapsed. Runs every `RelayQuotas.sweepInterval`.
    func sweepQuotas(now: Instant) {
        if let timeout = quotas.memberTimeout {
            var silent: [SessionID] = []
            for (id, state) in sessions where state.member != nil && state.transport != .legacy && now.since(state.lastHeard) >= timeout {
                silent.append(id)
            }
            for s in silent.sorted() {
                guard let m = sessions[s]?.member else { continue }
                event(.memberTimedOut(room: m.room, session: s, user: m.user))
                closeSession(s, .idle, text: "nothing heard from this device for \(timeout.microseconds / 1_000_000) s")
            }
        }
        if let expiry = quotas.emptyRoomExpiry, !configuration.bridged {
            var released: [String] = []
            for (name, room) in rooms {
                guard room.sessions.isEmpty else {
                    room.emptySince = nil
                    continue
                }
                // Only a room that never had a batch: one with history comes back from the
                // store at a restart, so its slot is taken until its history expires.
                guard room.head == 0, room.pendingCount == 0, !room.follows else { continue }
                guard let since = room.emptySince else {
                    room.emptySince = now
                    continue
                }
                if now.since(since) >= expiry { released.append(name) }
            }
            for name in released.sorted() {
                rooms[name] = nil
                event(.roomReleased(room: name))
            }
        }
        if !roomCreations.isEmpty { roomCreations = roomCreations.filter { $0.value > now } }
    }
}
