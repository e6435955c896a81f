// Bringing each member the room log: live batches, and syncs (snapshot or tail) in chunks.
import InkCodec
import InkProtocol

/// How a sync starts, decided from what the member has.
enum SyncPlan: Equatable {
    case tail(after: UInt64)
    /// A snapshot sync, resuming at this chunk (0: from the start).
    case snapshot(firstChunk: UInt32)
}

extension Relay {
    /// What a joiner needs, or nil when it is up to date.
    func syncPlan(for have: JoinHave, room: RoomState) -> SyncPlan? {
        switch have {
        case .nothing:
            return room.head == 0 ? nil : .snapshot(firstChunk: 0)
        case .upTo(let seq, _):
            if seq == room.head { return nil }
            if seq < room.head && room.tail.coversAfter(seq) { return .tail(after: seq) }
            return .snapshot(firstChunk: 0)
        case .partialSnapshot(let seq, let lastChunk):
            if let cache = room.snapshot, cache.throughRoomSeq == seq, room.tail.coversAfter(seq), lastChunk < UInt32.max {
                return .snapshot(firstChunk: min(lastChunk + 1, UInt32(cache.chunks.count)))
            }
            return .snapshot(firstChunk: 0)
        }
    }

    /// Starts a sync for `session` and sends what the window allows.
    func beginSync(_ session: SessionID, _ plan: SyncPlan) {
        guard let m = sessions[session]?.member, let room = rooms[m.room] else { return }
        let id = m.nextSyncID
        m.nextSyncID &+= 1
        let progress: SyncProgress
        switch plan {
        case .tail(let after):
            progress = SyncProgress(id: id, mode: .tail, after: after, through: room.head, digest: room.headDigest(),
                                    nextChunk: 0, ackedBelow: 0, tailNext: after + 1)
        case .snapshot(let first):
            let cache = freshSnapshot(room)
            let start = first <= UInt32(cache.chunks.count) ? first : 0
            progress = SyncProgress(id: id, mode: .snapshot, after: cache.throughRoomSeq, through: cache.throughRoomSeq,
                                    digest: cache.digest, snapshotChunks: cache.chunks, nextChunk: start,
                                    ackedBelow: start, tailNext: 0)
        }
        m.mode = .syncing(progress)
        send(session, .syncBegin(SyncBegin(syncID: id, mode: progress.mode, afterRoomSeq: progress.after,
                                           throughRoomSeq: progress.through, firstChunk: progress.nextChunk)))
        event(.syncStarted(room: m.room, session: session, mode: progress.mode, afterRoomSeq: progress.after, throughRoomSeq: progress.through))
        pump(session)
    }

    /// The room's cached snapshot when it is fresh enough and its tail still follows it, else a
    /// new one at the head.
    private func freshSnapshot(_ room: RoomState) -> SnapshotCache {
        if let c = room.snapshot, room.tail.coversAfter(c.throughRoomSeq), room.head - c.throughRoomSeq <= limits.snapshotMaxAge {
            return c
        }
        var items: [SyncItem] = []
        for batch in room.board.snapshotBatches(maxCommandsPerBatch: limits.snapshotCommandsPerBatch) {
            var state = BinaryCodecState()
            // A snapshot batch holds at most `snapshotCommandsPerBatch` known commands: it encodes.
            guard let payload = try? BinaryBatchCodec.encode(batch, state: &state, selfContained: true) else { continue }
            items.append(SyncItem(roomSeq: 0, author: batch.author, timeMs: 0, payload: payload))
        }
        let chunks = pack(items)
        let bytes = items.reduce(0) { $0 + $1.payload.count }
        let cache = SnapshotCache(throughRoomSeq: room.head, digest: room.headDigest(), chunks: chunks, bytes: bytes)
        room.snapshot = cache
        event(.snapshotBuilt(room: room.name, throughRoomSeq: room.head, items: items.count, bytes: bytes))
        return cache
    }

    /// Cuts items into chunks of about `syncChunkBytes` (a larger item goes alone).
    private func pack(_ items: [SyncItem]) -> [[SyncItem]] {
        var chunks: [[SyncItem]] = []
        var current: [SyncItem] = []
        var bytes = 0
        for item in items {
            let size = SessionMessageCodec.encodedSize(of: item)
            if !current.isEmpty && (bytes + size > limits.syncChunkBytes || current.count >= SessionMessageCodec.maxSyncItemsPerChunk) {
                chunks.append(current)
                current = []
                bytes = 0
            }
            current.append(item)
            bytes += size
        }
        if !current.isEmpty { chunks.append(current) }
        return chunks
    }

    func handleSyncAck(syncID: UInt32, chunk: UInt32, from session: SessionID) {
        guard let m = sessions[session]?.member else {
            refuse(session, .notJoined, originSeq: 0, text: "join a room first")
            return
        }
        guard case .syncing(var p) = m.mode, p.id == syncID else { return }
        if chunk < p.nextChunk, chunk + 1 > p.ackedBelow { p.ackedBelow = chunk + 1 }
        m.mode = .syncing(p)
        pump(session)
    }

    /// Sends `session` what it may have now: live batches up to the head, or the next sync
    /// chunks within the window. Nothing while its transport pushes back.
    func pump(_ session: SessionID) {
        guard let m = sessions[session]?.member, let room = rooms[m.room] else { return }
        pump(session, m, room)
    }

    /// `pump` for a member and its room already at hand (the fan-out: no lookups per member).
    func pump(_ session: SessionID, _ m: MemberState, _ room: RoomState) {
        guard !m.blocked else { return }
        switch m.mode {
        case .live: deliverLive(session, m, room)
        case .resync: startCatchUp(session)
        case .syncing: sendChunks(session)
        }
    }

    /// From the member's cursor to the head, one `roomBatch` each (its own origin skipped).
    private func deliverLive(_ session: SessionID, _ m: MemberState, _ room: RoomState) {
        while m.cursor < room.head {
            guard let entry = room.tail.entry(m.cursor + 1) else {
                // Fell out of the in-memory tail: a sync brings the rest.
                startCatchUp(session)
                return
            }
            m.cursor += 1
            if m.isLegacy {
                emit(.legacy(session, .batch(roomSeq: entry.record.roomSeq, author: entry.record.author,
                                             commands: entry.batch.commands, own: entry.record.origin == m.origin)))
                continue
            }
            if entry.record.origin == m.origin { continue }
            // The bytes of a per-member encoding, coded once for the members that agree.
            guard let payload = try? room.liveEncoder.encode(entry.batch, state: &m.outbound) else { continue }
            send(session, .roomBatch(RoomBatch(roomSeq: entry.record.roomSeq, author: entry.record.author,
                                               timeMs: entry.record.timeMs, payload: payload)))
        }
    }

    /// Brings a member that is behind up to the head: live when close, else a sync.
    private func startCatchUp(_ session: SessionID) {
        guard let m = sessions[session]?.member, let room = rooms[m.room] else { return }
        if m.cursor >= room.head {
            sessions[session]!.member!.mode = .live
            return
        }
        if room.head - m.cursor <= limits.maxLiveLag && room.tail.coversAfter(m.cursor) {
            sessions[session]!.member!.mode = .live
            deliverLive(session, m, room)
            return
        }
        beginSync(session, room.tail.coversAfter(m.cursor) ? .tail(after: m.cursor) : .snapshot(firstChunk: 0))
    }

    private func sendChunks(_ session: SessionID) {
        guard let m = sessions[session]?.member, case .syncing(var p) = m.mode, let room = rooms[m.room] else { return }
        while p.nextChunk - p.ackedBelow < limits.syncChunksInFlight {
            var items: [SyncItem] = []
            switch p.mode {
            case .snapshot:
                if Int(p.nextChunk) < p.snapshotChunks.count { items = p.snapshotChunks[Int(p.nextChunk)] }
            case .tail:
                var bytes = 0
                while p.tailNext <= p.through && items.count < SessionMessageCodec.maxSyncItemsPerChunk {
                    guard let entry = room.tail.entry(p.tailNext) else {
                        // The tail moved past this sync: start over from a snapshot.
                        m.mode = .resync
                        m.cursor = 0
                        beginSync(session, .snapshot(firstChunk: 0))
                        return
                    }
                    if entry.record.origin != m.origin {
                        let item = SyncItem(roomSeq: entry.record.roomSeq, author: entry.record.author,
                                            timeMs: entry.record.timeMs, payload: entry.record.payload)
                        let size = SessionMessageCodec.encodedSize(of: item)
                        if !items.isEmpty && bytes + size > limits.syncChunkBytes { break }
                        items.append(item)
                        bytes += size
                    }
                    p.tailNext += 1
                }
            }
            if items.isEmpty { break }
            p.bytesSent += items.reduce(0) { $0 + $1.payload.count }
            send(session, .syncChunk(syncID: p.id, index: p.nextChunk, items: items))
            p.nextChunk += 1
            p.chunksSent += 1
        }
        let finished: Bool
        switch p.mode {
        case .snapshot: finished = Int(p.nextChunk) >= p.snapshotChunks.count
        case .tail: finished = p.tailNext > p.through
        }
        guard finished else {
            m.mode = .syncing(p)
            return
        }
        send(session, .syncDone(syncID: p.id, roomSeq: p.through, digest: p.digest))
        event(.syncCompleted(room: m.room, session: session, roomSeq: p.through, chunks: p.chunksSent, bytes: p.bytesSent))
        m.cursor = p.through
        m.mode = .resync
        startCatchUp(session)
        pumpBlobs(session, m)  // images asked for during the sync: the strokes went first
    }
}
