// Joins and the teacher's grant/revoke of the right to draw.
import InkCodec
import InkProtocol

extension Relay {
    func handleJoin(_ request: JoinRequest, from session: SessionID, now: Instant) {
        guard sessions[session]?.member == nil else {
            refuseJoin(session, .alreadyJoined, "this session already joined a room")
            return
        }
        guard !request.room.isEmpty, !request.user.isEmpty, !request.user.contains(":") else {
            refuseJoin(session, .invalidName, "room and user must be non-empty; a user name has no ':'")
            return
        }
        var role = request.role
        var verifiedClaims: TokenClaims?
        switch authorizer.authorize(request, now: now) {
        case .refused(let reason, let text):
            refuseJoin(session, reason, text)
            return
        case .verified(let claims):
            verifiedClaims = claims
            guard claims.room == request.room, claims.user == request.user else {
                refuseJoin(session, .tokenMismatch, "the token is for another room or user")
                return
            }
            guard request.role >= claims.role else {
                refuseJoin(session, .roleNotAllowed, "the token allows at most \(claims.role)")
                return
            }
        case .open:
            break
        }
        if rooms[request.room] == nil {
            guard rooms.count < limits.maxRooms else {
                refuseJoin(session, .tooManyRooms, "the daemon holds \(limits.maxRooms) rooms")
                return
            }
            guard admitRoomCreation(session, room: request.room, tokenVerified: verifiedClaims != nil, now: now) else { return }
            rooms[request.room] = newRoom(request.room)
            event(.roomCreated(room: request.room))
        }
        // A device that reconnects replaces its old session (same origin in the room), once its
        // new session is confirmed: a replayed handshake must not push the device out.
        let confirmed = sessions[session]!.confirmed
        if confirmed { replaceOlderSessions(of: request.origin, in: request.room, keeping: session) }
        let room = rooms[request.room]!
        guard room.users[request.user] != nil || room.users.count < limits.maxUsersPerRoom else {
            refuseJoin(session, .roomFull, "the room knows \(limits.maxUsersPerRoom) users")
            return
        }
        // The quotas (RelayAdmission.swift) may make an idle member leave to make way.
        switch admitMember(session, request: request, tokenVerified: verifiedClaims != nil, room: room, now: now) {
        case .admitted: break
        case .refused: return
        case .held:
            sessions[session]!.heldJoin = request
            return
        }
        guard let user = room.user(named: request.user, limit: limits.maxUsersPerRoom) else {
            refuseJoin(session, .roomFull, "the room knows \(limits.maxUsersPerRoom) users")
            return
        }
        if role != .teacher, let right = user.drawRight { role = right ? .presenter : .viewer }
        room.sessions.append(session)

        let member = MemberState(room: request.room, user: request.user, author: user.author, role: role,
                                 origin: request.origin, cursor: room.head)
        member.request = request
        member.isLegacy = sessions[session]!.transport == .legacy
        member.authenticated = verifiedClaims != nil
        let plan = member.isLegacy ? nil : syncPlan(for: request.have, room: room)
        switch plan {
        case .tail(let after): member.cursor = after
        case .snapshot: member.cursor = 0
        case nil: break
        }
        if confirmed { joinDeadlines[session] = nil }
        sessions[session]!.member = member
        sessions[session]!.lastActed = now
        room.emptySince = nil
        if let verifiedClaims { noteTokenExpiry(session, claims: verifiedClaims, now: now) }
        event(.memberJoined(room: request.room, session: session, user: request.user, role: role))

        if member.isLegacy {
            emit(.legacy(session, .joined(author: user.author, role: role, board: room.board, roomSeq: room.head)))
        } else {
            send(session, .joinAccepted(member: user.author, role: role, roomHead: room.head, syncFollows: plan != nil))
        }
        // Who is here: to the joiner, every other present user once; the joiner to the others.
        var told: Set<String> = [request.user]
        for other in room.sessions where other != session {
            guard let m = sessions[other]?.member, !told.contains(m.user) else { continue }
            told.insert(m.user)
            send(session, .member(id: m.author, user: m.user, role: m.role, present: true))
        }
        for other in room.sessions where other != session {
            send(other, .member(id: user.author, user: request.user, role: role, present: true))
        }
        if let plan { beginSync(session, plan) }
    }

    func refuseJoin(_ session: SessionID, _ reason: JoinRefusal, _ text: String) {
        event(.joinRefused(session: session, reason))
        send(session, .joinRefused(reason, text: text))
        sessions[session]?.errors += 1
        if (sessions[session]?.errors ?? 0) > limits.maxErrorsPerSession {
            closeSession(session, .tooManyErrors, text: "too many errors")
        }
    }

    func handleDrawRight(user name: String, allowed: Bool, from session: SessionID) {
        guard let m = sessions[session]?.member else {
            refuse(session, .notJoined, originSeq: 0, text: "join a room first")
            return
        }
        guard m.role == .teacher else {
            refuse(session, .notTeacher, originSeq: 0, text: "only the teacher grants or revokes drawing")
            return
        }
        guard let room = rooms[m.room], var user = room.users[name] else {
            refuse(session, .unknownMember, originSeq: 0, text: "no user \(name) in this room")
            return
        }
        user.drawRight = allowed
        room.users[name] = user
        let newRole: MemberRole = allowed ? .presenter : .viewer
        var changed = false
        for s in room.sessions where sessions[s]?.member?.user == name && sessions[s]?.member?.role != .teacher {
            if sessions[s]!.member!.role != newRole { changed = true }
            sessions[s]!.member!.role = newRole
        }
        guard changed else { return }
        for s in room.sessions {
            send(s, .member(id: user.author, user: name, role: newRole, present: true))
        }
    }
}
