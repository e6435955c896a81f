// The room's board, written to the app so that its screen shows it: whole strokes, undo of
// its top "other" lines, clears; only when its user is not drawing.
import InkCodec
import InkProtocol

extension LegacySession {
    /// The room accepted the join: this app draws as `author`, and `board` is the room's board
    /// up to the batch before the first one `handleRoomBatch` will bring.
    public func handleJoined(author: AuthorID, board: Board, now: Instant) {
        guard self.author == nil else { return }
        advance(now)
        self.author = author
        self.board = board
        for stroke in board.strokes(on: shownPage) where !stroke.isEnded && stroke.ref.author != author {
            openForeign[stroke.ref] = now
        }
        rebuildShow = true
        dirty = true
    }

    /// One batch the room accepted, in room order; `own` when it is this app's.
    public func handleRoomBatch(author batchAuthor: AuthorID, commands: [TimedCommand], own: Bool, now: Instant) {
        guard closed == nil, author != nil else { return }
        advance(now)
        if own { unechoed = max(0, unechoed - 1) }
        let page = shownPage
        for timed in commands {
            var ref: StrokeRef?
            if case .point(let p) = timed.command {
                ref = StrokeRef(author: batchAuthor, stroke: p.stroke)
                if board.stroke(ref!) == nil { drawnOrder[ref!] = nextOrder(); if own { ownUnshown.insert(ref!) } }
            }
            board.apply(timed.command, author: batchAuthor)
            switch timed.command {
            case .point:
                guard let ref, let stroke = board.stroke(ref) else { break }
                if own {
                    if unechoed == 0 && mirror.shown[ref] == nil { addCandidate(ref) }
                    break
                }
                staleForeign.remove(ref)
                if stroke.isEnded { openForeign[ref] = nil; addCandidate(ref) } else { openForeign[ref] = now }
                if mirror.shown[ref] != nil { checkShown = true }  // more points on a line the app has
            case .clear:
                // Another author cleared a page; the app must see it when it shows that page.
                if !own && board.author(batchAuthor).page == page && !mirror.lines.isEmpty { pendingClear = true }
                checkShown = true
            case .undo, .erase:
                checkShown = true
            case .redo(let id):
                addCandidate(StrokeRef(author: batchAuthor, stroke: id))
            default:
                break
            }
        }
        if shownPage != page { pendingRepaint = true }
        if openForeign.count > 4096 { openForeign = openForeign.filter { board.stroke($0.key)?.isEnded == false } }
        if own && unechoed == 0 && !ownUnshown.isEmpty {
            // Own strokes the app does not show (its lines went in a clear): as "other" lines.
            for ref in ownUnshown where mirror.shown[ref] == nil { addCandidate(ref) }
            ownUnshown = []
        }
        dirty = true
    }

    private func nextOrder() -> UInt64 {
        orderCounter &+= 1
        return orderCounter
    }

    /// Foreign strokes whose author sent nothing for `staleStroke` are shown without their end.
    func markStale(now: Instant) {
        for (ref, last) in openForeign where now >= last + configuration.staleStroke {
            openForeign[ref] = nil
            if board.stroke(ref)?.isEnded == false {
                staleForeign.insert(ref)
                addCandidate(ref)
            }
            dirty = true
        }
    }

    // MARK: writing

    /// The next write for the app, built now: send it at once, as one TCP segment. Nil when
    /// nothing is due.
    public func pollTransmit(now: Instant) -> [UInt8]? {
        guard closed == nil else { return nil }
        advance(now)
        markStale(now: now)
        while true {
            if frameStart == frames.count {
                frames.removeAll(keepingCapacity: true)
                frameStart = 0
                guard produce(now: now) else { break }
            }
            if frameStart == 0 && !writer.isEmpty && frameEndsShow {
                // A stroke that fits in one chunk starts one rather than straddle two: the app
                // locks its user out from a line's start until its end, across its reads.
                let bytes = frames.reduce(LegacySession.penFrameBytes) { $0 + $1.count }
                if bytes <= LegacyChunkWriter.maxFrameBytes && !writer.fits(bytes) { return finishChunk(now: now) }
            }
            let frame = frames[frameStart]
            // A stroke's end leaves room for the pen that gives the app's user its own back.
            let reserve = frameStart == frames.count - 1 && frameEndsShow ? LegacySession.penFrameBytes : 0
            if !writer.isEmpty && !writer.fits(frame.count + reserve) { return finishChunk(now: now) }
            _ = writer.append(frame: frame)
            frameStart += 1
            stats.messagesOut += 1
        }
        if !writer.isEmpty { return finishChunk(now: now) }
        if now >= (lastChunkSent ?? openedAt) + configuration.heartbeatInterval { return finishChunk(now: now) }
        return nil
    }

    /// Bytes of a `3,c,w` frame (one-digit colour and width).
    static let penFrameBytes = LegacyFrame.headerBytes + 5

    /// Closes the chunk; when a whole stroke left the app with another pen, it ends with the
    /// app's own (the app's user may draw right after reading it).
    private func finishChunk(now: Instant) -> [UInt8] {
        // Between operations (none under way, or the next not begun): the app's pen is its own
        // until the next chunk, which then starts with the pen the next stroke needs.
        let betweenOps = frameStart == frames.count || frameStart == 0
        let appPen = frameStart == 0 && frameStart < frames.count ? (penBeforeOp ?? mirror.pen) : mirror.pen
        if betweenOps && appPen != ownPen {
            let restore = LegacyFrame.text(.penStyle(ownPen)).bytes
            if writer.fits(restore.count) {
                _ = writer.append(frame: restore)
                penWrittenAt = now
                stats.messagesOut += 1
                if frameStart == 0 && frameStart < frames.count {
                    if let needed = opPen, needed != ownPen, penBeforeOp == needed { frames.insert(LegacyFrame.text(.penStyle(needed)).bytes, at: 0) }
                    penBeforeOp = ownPen
                } else {
                    mirror.pen = ownPen
                }
            }
        }
        lastChunkSent = now
        stats.chunksSent += 1
        return writer.finish()
    }

    private func queue(_ message: LegacyMessage) {
        frames.append(LegacyFrame.text(message).bytes)
    }

    /// Whether the app's user may be drawing (or about to, unseen): write nothing that changes
    /// its lines or pen then.
    private func mayWrite(now: Instant) -> Bool {
        // A stroke with no point for `staleStroke` lost its end (the app turned it into a start
        // after a clear, or ignored it while a received line was open): its user is not drawing.
        if drawing, let last = lastInputAt, now < last + configuration.staleStroke { return false }
        if let safe = safeUntil, now <= safe { return true }
        guard let last = lastInputAt else { return true }
        return now >= last + configuration.quietAfterInput
    }

    /// Queues the frames of the next operation that brings the app closer to the board.
    private func produce(now: Instant) -> Bool {
        frameEndsShow = false
        opPen = nil
        penBeforeOp = nil
        guard let author, dirty, now >= screenReadyAt else { return false }
        guard mayWrite(now: now) else { return false }
        if pendingClear || pendingRepaint {
            if pendingRepaint { stats.repaints += 1 }
            pendingClear = false
            pendingRepaint = false
            rebuildShow = true
            if mirror.clearAll() {
                queue(.clear)
                cleared(now: now)
                return true
            }
        }
        // After a clear, new lines wait until the app's user was quiet for a while: if it drew
        // when the clear reached it (its reads late), its next point goes to the line its own
        // pointer names, and with lines back but fewer than that index the app crashes.
        if let held = linesHeldUntil {
            guard now >= held else { return false }
            linesHeldUntil = nil
        }
        if checkShown || !misshown.isEmpty {
            checkShown = false
            if hideWrongLines(author: author, now: now) { return true }
        }
        if rebuildShow {
            rebuildShow = false
            drawnOrder = [:]
            for stroke in board.strokes(on: shownPage) {
                drawnOrder[stroke.ref] = nextOrder()
                if stroke.isVisible && mirror.shown[stroke.ref] == nil { addCandidate(stroke.ref) }
            }
            candidates.reorder { drawnOrder[$0] ?? .max }
        }
        // The first stroke, in the board's drawing order, that the app should show and does not.
        let page = shownPage
        let next = candidates.first { ref in
            guard let stroke = board.stroke(ref), stroke.isVisible, stroke.page == page, mirror.shown[ref] == nil,
                  !stroke.points.isEmpty else { return .drop }
            return showable(stroke, author: author) ? .take : .keep
        }
        if let ref = next, let stroke = board.stroke(ref) {
            if ref.author == author, let newest = newestOwnLine, LegacySession.isOlder(ref.stroke, than: newest),
               mirror.shown[StrokeRef(author: author, stroke: newest)] != nil {
                // The app's user drew since its lines were emptied (while a repaint waited for
                // it): this older line of its own stands above its newer ones, unlike on every
                // other screen. It is shown now; once the user pauses, the page is drawn again in
                // the board's order (at once, every pause would be cut by a repaint).
                reorderWanted = true
            }
            if ref.author != author, let above = linesAbove(ref) {
                // Its author's later strokes are on the app already (it was redone, or drawn
                // again after being taken off): they come off first and follow it.
                return takeOff(above, now: now)
            }
            candidates.remove(ref)
            show(stroke, now: now)
            return true
        }
        if mirror.pen != ownPen || reassertPen {
            restorePen(now: now)
            return true
        }
        if reorderWanted {
            guard let last = lastInputAt, now < last + configuration.quietAfterInput else {
                reorderWanted = false
                stats.reorderRepaints += 1
                return produceRepaint(now: now)
            }
            return false  // dirty: again once the user was quiet for `quietAfterInput`
        }
        dirty = false
        return false
    }

    /// Takes off the app every line that shows what the board no longer has there, by undoing
    /// the top of its "other" chain (lines above come back as candidates), or asks for a
    /// repaint when the chain does not reach them. True when frames were queued.
    private func hideWrongLines(author: AuthorID, now: Instant) -> Bool {
        let page = shownPage
        var hide = Set<Int>()
        for (index, line) in mirror.lines.enumerated() {
            guard let ref = line.stroke else { continue }
            let stroke = board.stroke(ref)
            let own = ref.author == author
            if own && stroke == nil && unechoed > 0 { continue }  // not back from the room yet
            var wrong = line.altered || stroke == nil || stroke?.isVisible != true || stroke?.page != page || mirror.shown[ref] != index
            if !wrong, line.owner == .other, let count = shownPoints[ref], count != stroke!.points.count { wrong = true }
            if wrong { hide.insert(index) }
        }
        misshown = []
        guard !hide.isEmpty else { return false }
        return takeOff(hide, now: now)
    }

    /// Takes the lines at `hide` off the app by undoing its top "other" lines down to them (the
    /// lines above come back as candidates), or repaints when that chain does not reach them.
    private func takeOff(_ hide: Set<Int>, now: Instant) -> Bool {
        guard let steps = walk(toHide: hide) else {
            pendingRepaint = true
            return produceRepaint(now: now)
        }
        for _ in 0..<steps {
            if let line = mirror.cancel(.other), let ref = line.stroke {
                shownPoints[ref] = nil
                addCandidate(ref)
            }
            queue(.undo)
        }
        stats.linesHidden += steps
        return true
    }

    private func produceRepaint(now: Instant) -> Bool {
        pendingRepaint = false
        stats.repaints += 1
        rebuildShow = true
        guard mirror.clearAll() else { return false }
        queue(.clear)
        cleared(now: now)
        return true
    }

    /// Whether the app's stroke `a` came before `b` (its stroke numbers count up and wrap).
    static func isOlder(_ a: StrokeID, than b: StrokeID) -> Bool {
        let distance = b.rawValue &- a.rawValue
        return distance != 0 && distance < 1 << 31
    }

    private func cleared(now: Instant) {
        newestOwnLine = nil
        reorderWanted = false
        topShownOrder = [:]
        shownPoints = [:]
        clearWrittenAt = now
        linesHeldUntil = now + configuration.quietAfterInput
    }

    /// Undo steps (from the top of the app's "other" chain) that take every line of `hide` off,
    /// or nil when the chain does not reach them all (a line of the app's own, a broken link).
    private func walk(toHide hide: Set<Int>) -> Int? {
        var left = hide
        var pointer = mirror.otherPointer
        var steps = 0
        while !left.isEmpty {
            guard let p = pointer, let line = mirror.line(at: p), line.index == p, line.owner == .other,
                  steps < LegacySession.maxWalk else { return nil }
            left.remove(p)
            steps += 1
            pointer = line.previous
        }
        return steps
    }

    /// Lines undone at most to take one off; deeper than this a repaint is cheaper.
    static let maxWalk = 64

    private func showable(_ stroke: Board.Stroke, author: AuthorID) -> Bool {
        if stroke.ref.author == author {
            // The app's own, not on its screen (a clear reached it): once back from the room,
            // and, without an end, once the app draws another (a clear cut it short there).
            return unechoed == 0 && (stroke.isEnded || stroke.ref != appStroke)
        }
        return stroke.isEnded || staleForeign.contains(stroke.ref)
    }

    /// One stroke as the app's "other" user draws it: its pen, then start to end.
    private func show(_ stroke: Board.Stroke, now: Instant) {
        penBeforeOp = mirror.pen
        opPen = stroke.style
        if mirror.pen != stroke.style {
            queue(.penStyle(stroke.style))
            mirror.pen = stroke.style
            penWrittenAt = now
        }
        let last = stroke.points.count - 1
        for (i, point) in stroke.points.enumerated() {
            // Always closed: an open line would lock the app's user out of drawing.
            let phase: StrokePhase = i == 0 ? .start : (i == last ? .end : .move)
            queue(.point(tool: stroke.tool, x: point.x, y: point.y, phase: phase))
        }
        if last == 0 { queue(.point(tool: stroke.tool, x: stroke.points[0].x, y: stroke.points[0].y, phase: .end)) }
        frameEndsShow = true
        if let order = drawnOrder[stroke.ref] { topShownOrder[stroke.ref.author] = max(topShownOrder[stroke.ref.author] ?? 0, order) }
        mirror.start(.other, stroke: stroke.ref)
        shownPoints[stroke.ref] = stroke.points.count
        openForeign[stroke.ref] = nil
        stats.strokesShown += 1
    }

    /// The app's lines of `ref`'s author that come after it in the drawing order; nil when none.
    private func linesAbove(_ ref: StrokeRef) -> Set<Int>? {
        let order = drawnOrder[ref] ?? .max
        guard let top = topShownOrder[ref.author], top > order else { return nil }
        var above = Set<Int>()
        var below: UInt64 = 0
        for (index, line) in mirror.lines.enumerated() {
            guard let r = line.stroke, r.author == ref.author, mirror.shown[r] == index, let o = drawnOrder[r] else { continue }
            if o > order { above.insert(index) } else { below = max(below, o) }
        }
        if above.isEmpty { topShownOrder[ref.author] = below }
        return above.isEmpty ? nil : above
    }

    /// Gives the app's user back the pen it picked (a received pen style becomes the app's own).
    private func restorePen(now: Instant) {
        guard mirror.pen != ownPen || reassertPen else { return }
        if reassertPen { stats.penReasserts += 1 }
        reassertPen = false
        queue(.penStyle(ownPen))
        mirror.pen = ownPen
        penWrittenAt = now
    }
}
