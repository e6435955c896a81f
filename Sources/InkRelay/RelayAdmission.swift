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

    /// What the quotas say about a join.
    enum Admission {
        case admitted
        /// Refused (the refusal is sent).
        case refused
        /// Someone must make way, and the joining session has not proved it holds its keys
        /// (it may be a replayed handshake): decided again once it is confirmed.
        case held
    }

    /// Whether `session` may join `room` under the quotas, closing idle or unconfirmed members
    /// where some must make way. A refusal is sent here.
    ///
    /// 1. The user's sessions in the room: at `maxSessionsPerUser`, its unconfirmed sessions
    ///    (handshakes that never proved their keys: replays) and then its oldest idle ones go.
    /// 2. The address's sessions (legacy ones apart): at the bound the join is refused, unless
    ///    a token grants teacher or presenter.
    /// 3. The room's size: with tokens required, all but `memberReserve` places for everyone,
    ///    the rest for teacher and presenter tokens; in a room full to the bound such a token
    ///    gets the place of an unconfirmed session, else of an idle viewer session of its own
    ///    user, else of the oldest idle member without a token (never a teacher's).
    ///
    /// Only a confirmed session makes others leave: an unconfirmed one that needs it is held
    /// (`Admission.held`) until `handleSessionConfirmed`, so a replayed handshake, which never
    /// confirms, closes nobody. Sessions of the joining device itself (its `origin`) are not
    /// counted per user or per address: they are replaced once the new session is confirmed.
    func admitMember(_ session: SessionID, request: JoinRequest, tokenVerified: Bool, room: RoomState, now: Instant) -> Admission {
        guard let state = sessions[session] else { return .refused }
        let user = request.user
        let role = request.role
        let legacy = state.transport == .legacy
        let privileged = tokenVerified && !legacy && role != .viewer
        let others = room.sessions.filter { sessions[$0]?.member?.origin != request.origin }
        var victims: [(SessionID, RelayQuota, String)] = []
        if quotas.maxSessionsPerUser > 0 {
            let own = others.filter { sessions[$0]?.member?.user == user }
            let needed = own.count - quotas.maxSessionsPerUser + 1
            if needed > 0 {
                let chosen = makeWay(own, count: needed, now: now)
                guard chosen.count == needed else {
                    refuseQuota(session, room: room.name, .sessionsPerUser, offender: "user \(user)",
                                "user \(user) has \(own.count) sessions in this room, the most one user may (none idle)")
                    return .refused
                }
                victims += chosen.map { ($0, .sessionsPerUser, "a newer session of this user took the place of this idle one") }
            }
        }
        let addressBound = legacy ? quotas.maxLegacyPerAddress : quotas.maxSessionsPerAddress
        if addressBound > 0, !privileged, let source = state.source {
            let count = others.reduce(0) { n, s in
                guard let other = sessions[s], other.source == source, (other.transport == .legacy) == legacy else { return n }
                return n + 1
            }
            if count >= addressBound {
                refuseQuota(session, room: room.name, legacy ? .legacyPerAddress : .sessionsPerAddress, offender: "address \(source)",
                            "address \(source) has \(count) \(legacy ? "legacy connections" : "sessions") in this room, the most one address may")
                return .refused
            }
        }
        let bound = limits.maxMembersPerRoom
        let reserve = authorizer.requiresTokens ? min(quotas.memberReserve, bound) : 0
        let capacity = privileged ? bound : bound - reserve
        let remaining = room.sessions.filter { s in !victims.contains { $0.0 == s } }
        if remaining.count >= capacity {
            // One place is made for a teacher or presenter, never several (after a lower bound).
            guard privileged, remaining.count == capacity, let victim = reserveVictim(remaining, user: user, now: now) else {
                refuseJoin(session, .roomFull, reserve > 0 && !privileged
                           ? "the room has \(remaining.count) members (\(reserve) more places are kept for teachers and presenters)"
                           : "the room has \(remaining.count) members")
                return .refused
            }
            victims.append((victim, .memberReserve, "the room is full: this idle session made way for a \(role)"))
        }
        guard !victims.isEmpty else { return .admitted }
        guard state.confirmed else { return .held }
        for (victim, quota, text) in victims { evict(victim, room: room, quota, text: text) }
        return .admitted
    }

    /// Whether the member on `session` has not drawn for `idleAfter`.
    func isIdle(_ session: SessionID, now: Instant) -> Bool {
        guard let state = sessions[session], state.member != nil else { return false }
        return now.since(state.lastActed) >= quotas.idleAfter
    }

    /// Up to `count` of `candidates` to close: unconfirmed ones first (oldest session first),
    /// then idle ones, the one that acted longest ago first.
    func makeWay(_ candidates: [SessionID], count: Int, now: Instant) -> [SessionID] {
        let unconfirmed = candidates.filter { sessions[$0]?.confirmed == false }.sorted()
        let idle = candidates.filter { sessions[$0]?.confirmed == true && isIdle($0, now: now) }
            .sorted { (sessions[$0]!.lastActed, $0) < (sessions[$1]!.lastActed, $1) }
        return Array((unconfirmed + idle).prefix(count))
    }

    /// Who makes way for a teacher or presenter token of `user` in a full room: an unconfirmed
    /// session, else an idle viewer session of that user, else the idle member without a token
    /// (never a teacher) that acted longest ago.
    func reserveVictim(_ members: [SessionID], user: String, now: Instant) -> SessionID? {
        if let replay = members.filter({ sessions[$0]?.confirmed == false }).min() { return replay }
        let ownViewers = members.filter { sessions[$0]?.member.map { $0.user == user && $0.role == .viewer } ?? false }
        if let victim = makeWay(ownViewers, count: 1, now: now).first { return victim }
        let unauthenticated = members.filter { sessions[$0]?.member.map { !$0.authenticated && $0.role != .teacher } ?? false }
        return makeWay(unauthenticated, count: 1, now: now).first
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
