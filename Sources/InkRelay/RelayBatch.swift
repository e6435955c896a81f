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
        admit(decoded.commands, originSeq: originSeq, member: m, from: session, now: now)
    }

    /// A legacy session's commands, already in the model (its app's text never went through
    /// the binary codec; the room log gets the canonical encoding as for any batch).
    public func handleLegacyCommands(_ commands: [TimedCommand], originSeq: UInt64, from session: SessionID, now: Instant) {
        guard let m = sessions[session]?.member else {
            refuse(session, .notJoined, originSeq: originSeq, text: "join a room first")
            return
        }
        sessions[session]!.lastHeard = now
        sessions[session]!.lastActed = now
        guard commands.count <= Batch.maxCommands else {
            event(.batchRefused(session: session, .batchTooLarge))
            refuse(session, .batchTooLarge, originSeq: originSeq, text: "batch of \(commands.count) commands exceeds \(Batch.maxCommands)")
            return
        }
        admit(commands, originSeq: originSeq, member: m, from: session, now: now)
    }

    /// The checks after decoding: sequence, dedupe, permission, size, admission; then accept.
    private func admit(_ commands: [TimedCommand], originSeq: UInt64, member m: MemberState, from session: SessionID, now: Instant) {
        guard originSeq > 0 else {
            event(.batchRefused(session: session, .invalidOriginSeq))
            refuse(session, .invalidOriginSeq, originSeq: 0, text: "originSeq starts at 1")
            return
        }
        let room = rooms[m.room]!
        switch originCheck(room: room, origin: m.origin, originSeq: originSeq, commands: commands) {
        case .next:
            break
        case .gap(let expected):
            event(.batchRefused(session: session, .originSeqGap))
            refuse(session, .originSeqGap, originSeq: originSeq, text: "originSeq \(originSeq) skips ahead: expected \(expected)")
            return
        case .inLog(let roomSeq):
            event(.batchDuplicate(room: m.room, origin: m.origin, originSeq: originSeq))
            // Acknowledged once durable: now, or by the pending ack of its first copy.
            if roomSeq <= room.durable { send(session, .batchAck(originSeq: originSeq, roomSeq: roomSeq)) }
            return
        case .notInLog(let why):
            // A following room's batch may still be on its way to the home daemon: send it again
            // (the home keeps one copy); the ack comes once its record is durable here.
            if room.follows, why == .notFound {
                forwardAgain(commands, room: room, member: m, originSeq: originSeq)
                return
            }
            event(.batchRefused(session: session, .originSeqReused))
            refuse(session, .originSeqReused, originSeq: originSeq, text: why == .otherContent
                   ? "originSeq \(originSeq) already names another batch of this device"
                   : "originSeq \(originSeq) is not in the room's recent log (refused before, or too old to check)")
            return
        }
        // From here the number is used, whether the batch is taken or refused.
        room.noteProcessed(m.origin, originSeq: originSeq, limit: limits.maxOriginsPerRoom)
        let batch = Batch(author: m.author, commands: commands)
        if let refusal = permissionRefusal(batch, role: m.role, board: room.board) ?? blobRefusal(batch, room: m.room) {
            event(.batchRefused(session: session, refusal.0))
            refuse(session, refusal.0, originSeq: originSeq, text: refusal.1)
            return
        }
        var scratch = BinaryCodecState()
        guard let canonical = try? BinaryBatchCodec.encode(batch, state: &scratch, selfContained: true) else {
            event(.batchRefused(session: session, .malformedBatch))
            refuse(session, .malformedBatch, originSeq: originSeq, text: "batch cannot be re-encoded")
            return
        }
        if let refusal = admission?.admit(room: m.room, bytes: canonical.count) {
            // Not the device's fault: not counted against `maxErrorsPerSession`, and the number
            // may come again with this batch or another (docs/protocol.md 5a).
            room.noteRetryable(m.origin, originSeq: originSeq)
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

    /// How a batch's `originSeq` stands against what the room knows of its origin.
    enum OriginCheck: Equatable {
        /// The number expected (or the first of an origin this relay has not seen yet).
        case next
        /// Past the expected number.
        case gap(expected: UInt64)
        /// Sent before and in the log, same commands, at this room sequence number.
        case inLog(roomSeq: UInt64)
        case notInLog(NotInLog)

        enum NotInLog: Equatable {
            /// The log has this number with other commands.
            case otherContent
            /// The in-memory tail does not hold this number.
            case notFound
        }
    }

    /// docs/protocol.md 5a, originSeq rules.
    func originCheck(room: RoomState, origin: UInt64, originSeq: UInt64, commands: [TimedCommand]) -> OriginCheck {
        guard let seen = room.origins[origin] else { return .next }
        let isRepeat: Bool
        if let expected = seen.expected {
            if originSeq > expected { return .gap(expected: expected) }
            isRepeat = originSeq < expected
        } else {
            isRepeat = originSeq <= seen.lastOriginSeq
        }
        guard isRepeat, !seen.retryable.contains(originSeq) else { return .next }
        guard let roomSeq = room.tail.find(origin: origin, originSeq: originSeq), let entry = room.tail.entry(roomSeq) else {
            return .notInLog(.notFound)
        }
        return entry.batch.commands == commands ? .inLog(roomSeq: roomSeq) : .notInLog(.otherContent)
    }

    /// A following room's batch sent again and not yet back from the home: forward it again.
    private func forwardAgain(_ commands: [TimedCommand], room: RoomState, member m: MemberState, originSeq: UInt64) {
        var scratch = BinaryCodecState()
        guard let canonical = try? BinaryBatchCodec.encode(Batch(author: m.author, commands: commands), state: &scratch,
                                                           selfContained: true) else { return }
        forward(ForwardedBatch(room: room.name, origin: m.origin, originSeq: originSeq, user: m.user, payload: canonical))
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
