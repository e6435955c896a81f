// Accepting a batch: size, decode, dedupe, permission, then append and fan out. And restore.
import InkCodec
import InkProtocol

extension Relay {
    func handleBatch(originSeq: UInt64, payload: [UInt8], from session: SessionID, now: Instant) {
        guard let m = sessions[session]?.member else {
            refuse(session, .notJoined, originSeq: originSeq, text: "join a room first")
            return
        }
        guard payload.count <= limits.maxBatchPayloadBytes else {
            event(.batchRefused(session: session, .batchTooLarge))
            refuse(session, .batchTooLarge, originSeq: originSeq, text: "batch of \(payload.count) bytes exceeds \(limits.maxBatchPayloadBytes)")
            return
        }
        // Decode before any other check: the device's encoder advanced its codec state for this
        // batch, refused or not, and ours must stay in step.
        let decoded: Batch
        do {
            decoded = try BinaryBatchCodec.decode(payload, state: &m.inbound)
        } catch {
            event(.batchRefused(session: session, .malformedBatch))
            refuse(session, .malformedBatch, originSeq: originSeq, text: "undecodable batch: \(error)")
            return
        }
        guard originSeq > 0 else {
            event(.batchRefused(session: session, .invalidOriginSeq))
            refuse(session, .invalidOriginSeq, originSeq: 0, text: "originSeq starts at 1")
            return
        }
        let room = rooms[m.room]!
        if let seen = room.origins[m.origin], originSeq <= seen.lastOriginSeq {
            event(.batchDuplicate(room: m.room, origin: m.origin, originSeq: originSeq))
            // Name where this very batch landed when the tail still has it, so the device can
            // place it; else the producer's latest (acks cover earlier batches).
            let landed = room.tail.find(origin: m.origin, originSeq: originSeq).map { ($0, originSeq) }
                ?? (seen.lastRoomSeq, seen.lastOriginSeq)
            if landed.0 <= room.durable {
                send(session, .batchAck(originSeq: landed.1, roomSeq: landed.0))
            }
            return
        }
        if let refusal = permissionRefusal(decoded, role: m.role, board: room.board) {
            event(.batchRefused(session: session, refusal.0))
            refuse(session, refusal.0, originSeq: originSeq, text: refusal.1)
            return
        }
        let batch = Batch(author: m.author, commands: decoded.commands)
        var scratch = BinaryCodecState()
        guard let canonical = try? BinaryBatchCodec.encode(batch, state: &scratch, selfContained: true) else {
            event(.batchRefused(session: session, .malformedBatch))
            refuse(session, .malformedBatch, originSeq: originSeq, text: "batch cannot be re-encoded")
            return
        }
        if let refusal = admission?.admit(room: m.room, bytes: canonical.count) {
            // Not the device's fault: not counted against `maxErrorsPerSession`.
            event(.batchRefused(session: session, refusal.code))
            send(session, .error(refusal.code, originSeq: originSeq, text: refusal.text))
            return
        }
        if room.follows {
            forward(ForwardedBatch(room: m.room, origin: m.origin, originSeq: originSeq, user: m.user, payload: canonical))
            return
        }
        accept(batch, canonical: canonical, room: room, user: m.user, origin: m.origin, originSeq: originSeq, now: now)
    }

    /// Numbers, folds, keeps, stores and fans out one batch that passed every check.
    func accept(_ batch: Batch, canonical: [UInt8], room: RoomState, user: String, origin: UInt64, originSeq: UInt64, now: Instant) {
        let seq = room.head + 1
        let record = RelayRecord(room: room.name, roomSeq: seq, author: batch.author, user: user, origin: origin,
                                 originSeq: originSeq, timeMs: wallMs(now), payload: canonical)
        room.head = seq
        room.fold(batch)
        room.tail.append(TailEntry(record: record, batch: batch))
        room.noteOrigin(origin, originSeq: originSeq, roomSeq: seq, limit: limits.maxOriginsPerRoom)
        if let dropped = room.pushPendingAck(PendingAck(roomSeq: seq, origin: origin, originSeq: originSeq), limit: limits.maxPendingAcks) {
            event(.pendingAckDropped(room: room.name, roomSeq: dropped.roomSeq))
        }
        emit(.append(record))
        event(.batchAccepted(room: room.name, roomSeq: seq, bytes: canonical.count))
        fanOut(room: room.name)
    }

    /// Why `role` may not apply `batch` now, or nil.
    private func permissionRefusal(_ batch: Batch, role: MemberRole, board: Board) -> (SessionErrorCode, String)? {
        switch role {
        case .viewer:
            return (.permissionDenied, "viewers may not draw")
        case .presenter:
            if board.isLocked { return (.permissionDenied, "the board is locked") }
            if batch.commands.contains(where: { if case .room = $0.command { true } else { false } }) {
                return (.notTeacher, "only the teacher sends room commands")
            }
            return nil
        case .teacher:
            return nil
        }
    }

    /// Offers the new head to every member of the room, in join order.
    func fanOut(room name: String) {
        guard let room = rooms[name] else { return }
        for s in room.sessions {
            guard let m = sessions[s]?.member else { continue }
            if m.blocked {
                if case .live = m.mode, room.head - m.cursor > limits.maxLiveLag {
                    sessions[s]!.member!.mode = .resync
                    event(.memberResync(room: name, session: s, cursor: m.cursor))
                }
                continue
            }
            pump(s, m, room)
        }
    }

    /// Rebuilds a room from its durable log at start: call for every record of a room in
    /// `roomSeq` order (rooms in any order), before any session opens.
    public func restore(_ record: RelayRecord) throws(RelayRestoreError) {
        if rooms[record.room] == nil {
            guard rooms.count < limits.maxRooms else { throw .tooManyRooms }
            rooms[record.room] = newRoom(record.room)
        }
        let room = rooms[record.room]!
        guard record.roomSeq == room.head + 1 else { throw .outOfOrder(expected: room.head + 1, got: record.roomSeq) }
        var fresh = BinaryCodecState()
        guard let decoded = try? BinaryBatchCodec.decode(record.payload, state: &fresh) else {
            throw .undecodablePayload(roomSeq: record.roomSeq)
        }
        let batch = Batch(author: record.author, commands: decoded.commands)
        room.head = record.roomSeq
        room.durable = record.roomSeq
        room.fold(batch)
        room.tail.append(TailEntry(record: record, batch: batch))
        if room.users[record.user] == nil {
            room.users[record.user] = RoomUser(author: record.author, name: record.user)
        }
        if record.author.rawValue >= room.nextAuthor { room.nextAuthor = record.author.rawValue &+ 1 }
        room.noteOrigin(record.origin, originSeq: record.originSeq, roomSeq: record.roomSeq, limit: limits.maxOriginsPerRoom)
    }
}
