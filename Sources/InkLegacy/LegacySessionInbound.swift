// The app's bytes: heartbeats, its own drawing and edits, turned into the room's commands.
import InkCodec
import InkProtocol

/// An undo, redo or clear of the app, waiting for the points it may have overtaken.
struct PendingEdit {
    var message: LegacyMessage
    var arrivedAt: Instant
    /// The app's user was drawing when it arrived: it goes right after that stroke's end.
    var afterNextEnd: Bool
    /// Otherwise: applied by this time at the latest.
    var deadline: Instant
}

extension LegacySession {
    /// One read from the app.
    public func handleBytes(_ bytes: some Collection<UInt8>, now: Instant) {
        guard closed == nil else { return }
        advance(now)
        var burst: [LegacyMessage] = []
        do {
            try decoder.handleBytes(bytes)
            while let frame = try decoder.pollFrame() {
                switch frame {
                case .heartbeat:
                    lastHeartbeatHeard = now
                case .data(let command, let payload) where command == LegacyFrame.textCommand:
                    if let message = try? LegacyMessage(parsing: payload[...]) {
                        burst.append(message)
                    } else {
                        stats.skippedIn += 1  // the app logs and ignores what it cannot read
                    }
                case .data:
                    stats.skippedIn += 1  // file chunks belong to the upload port
                }
            }
        } catch {
            close(.badFrame(error))
            return
        }
        stats.messagesIn += burst.count
        guard !burst.isEmpty else { return }
        receive(burst, now: now)
        flushSubmitted(now: now)
    }

    /// Messages of one read, in order: edits wait for the points they may have overtaken.
    private func receive(_ burst: [LegacyMessage], now: Instant) {
        for message in burst {
            switch message {
            case .undo, .redo, .clear:
                if pendingEdits.count >= LegacySessionLimits.maxPendingEdits { placeEdit(0, split: held.count, now: now) }
                pendingEdits.append(PendingEdit(message: message, arrivedAt: now, afterNextEnd: drawingAfterHeld,
                                                deadline: now + configuration.appFlushInterval + configuration.editSlack))
            default:
                if pendingEdits.isEmpty { apply(message, now: now) } else { held.append((message, now)) }
            }
        }
        placeHeld(now: now)
        if !drawing { safeUntil = now + LegacySession.safeSlot }
    }

    /// Whether the app's user draws once every held message is applied.
    private var drawingAfterHeld: Bool {
        for m in held.reversed() { if case .point(_, _, _, let phase) = m.message { return phase != .end } }
        return drawing
    }

    /// How long after the app reports a stroke's end (or a button) we may write: its user lifts
    /// the finger for at least 80 ms between strokes, more than its 60 ms buffer delays the end.
    static let safeSlot = Instant.Duration.milliseconds(5)

    /// Places pending edits among the messages that arrived after them.
    private func placeHeld(now: Instant) {
        while let edit = pendingEdits.first {
            if edit.afterNextEnd {
                // Right after the end of the stroke that was being drawn.
                guard let end = held.firstIndex(where: { if case .point(_, _, _, .end) = $0.message { true } else { false } }) else { return }
                placeEdit(0, split: end + 1, now: now)
                continue
            }
            guard let first = held.first else { return }
            if first.at > edit.deadline {
                placeEdit(0, split: 0, now: now)
                continue
            }
            // The app's next flush: the points it had buffered when it sent the edit, and at
            // most the beginning of a stroke drawn after it (only at many times human speed).
            let flush = held.prefix { $0.at == first.at }
            let startsStroke = { (m: LegacyMessage) -> Bool in if case .point(_, _, _, .start) = m { true } else { false } }
            let isPoint = { (m: LegacyMessage) -> Bool in if case .point = m { true } else { false } }
            let lateInTick = first.at.since(edit.arrivedAt) < Instant.Duration(microseconds: configuration.appFlushInterval.microseconds / 2)
            let firstPointStarts = flush.first(where: { isPoint($0.message) }).map { startsStroke($0.message) } ?? false
            var split = 0
            if lateInTick || !firstPointStarts {
                // After the last stroke that ended in this flush, before a stroke still open.
                if let end = flush.lastIndex(where: { if case .point(_, _, _, .end) = $0.message { true } else { false } }) {
                    split = end + 1
                } else if !flush.contains(where: { startsStroke($0.message) }) {
                    split = flush.count
                }
            }
            placeEdit(0, split: split, now: now)
        }
    }

    /// Edits whose deadline passed with nothing arriving after them.
    func placeDueEdits(now: Instant) {
        while let edit = pendingEdits.first, !edit.afterNextEnd, held.isEmpty, now >= edit.deadline {
            placeEdit(0, split: 0, now: now)
        }
    }

    /// Applies `held[..<split]`, then the first pending edit; the rest stays held behind the
    /// other pending edits (or is applied when there are none).
    private func placeEdit(_ index: Int, split: Int, now: Instant) {
        let before = held.prefix(split)
        held.removeFirst(split)
        for m in before { apply(m.message, now: now) }
        let edit = pendingEdits.remove(at: index)
        apply(edit.message, now: now)
        if pendingEdits.isEmpty {
            let rest = held
            held = []
            for m in rest { apply(m.message, now: now) }
        }
    }

    // MARK: applying the app's actions

    /// One action of the app, in the order it happened on the app.
    private func apply(_ message: LegacyMessage, now: Instant) {
        guard let author else { return }  // not joined: nothing to draw as (the join is immediate)
        lastInputAt = now
        dirty = true
        switch message {
        case .penStyle(let style):
            mirror.pen = style
            ownPen = style
            if let written = penWrittenAt, now.since(written) < configuration.appFlushInterval + configuration.editSlack {
                reassertPen = true  // our pen may have reached the app after this pick
            }
            submitPen(style)
        case .point(let tool, let x, let y, let phase):
            mirror.touched()
            if phase == .start && drawing, let cleared = clearWrittenAt, cleared >= lastStartAt {
                // A start with no end before it: the app turned a point of its stroke into one
                // because it had no line left, so our clear reached it in that stroke, after
                // the points we placed behind it. Its lines are what it drew since.
                mirror.clearAll()
                topShownOrder = [:]
                rebuildShow = true
                stats.drifts += 1
            } else if phase == .start && drawing {
                // A start with no end before it otherwise: the app ignored its user's end while
                // a received line was open, or a clear we wrote reached it during that stroke and
                // its end became a start there. Its lines may not be what we think: repaint.
                pendingRepaint = true
                stats.drifts += 1
            }
            drawing = phase != .end
            if phase == .start { lastStartAt = now }
            if phase == .start || mirror.lines.isEmpty {
                // A point while the app has no line becomes a start there (and is sent as one).
                startStroke(tool: tool, x: x, y: y, author: author)
                return
            }
            switch mirror.point(.mine, newStroke: nil) {
            case .newLine:
                break  // not reached: the app has lines
            case .appended(let index):
                let line = mirror.lines[index]
                if let stroke = line.stroke, stroke.author == author, !line.altered {
                    submit(.point(StrokePoint(stroke: stroke.stroke, tool: tool, phase: phase, x: x, y: y)))
                } else {
                    // On another author's line or a placeholder: the room cannot follow; the
                    // line is drawn again from the room.
                    mirror.alter(index)
                    misshown.insert(index)
                    stats.misplacedPoints += 1
                }
            case .crash:
                stats.appCrashes += 1
            }
        case .undo:
            guard let line = mirror.cancel(.mine) else { stats.drifts += 1; return }
            if let stroke = line.stroke {
                // Its own line: undone everywhere. Another author's (its pointer is stale after
                // a clear): the app took it off its own screen only, so it is drawn again.
                if stroke.author == author { submit(.undo(stroke.stroke)) } else { addCandidate(stroke) }
            }
        case .redo:
            switch mirror.resume(.mine) {
            case .resumed(let line):
                if let stroke = line.stroke, stroke.author == author { submit(.redo(stroke.stroke)) } else { checkShown = true }
            case .nothing: stats.drifts += 1
            case .crash: stats.appCrashes += 1
            }
        case .clear:
            guard mirror.clearAll() else { stats.drifts += 1; return }
            newestOwnLine = nil
            reorderWanted = false
            topShownOrder = [:]
            pendingClear = false  // the app is empty: whatever the room cleared is gone here too
            submitPage()
            submit(.clear)
        }
    }

    private func nextRef(_ author: AuthorID) -> StrokeRef { StrokeRef(author: author, stroke: StrokeID(nextStroke)) }

    /// A line of the app's own: the room gets it with the pen the app draws it with.
    private func startStroke(tool: Tool, x: Int32, y: Int32, author: AuthorID) {
        var pen = mirror.pen
        if (tool == .eraser) != (pen.color == PenStyle.eraserColor) {
            // The app sends eraser points exactly when its pen is the eraser: we lost track.
            stats.drifts += 1
            if tool == .eraser { pen = PenStyle(color: PenStyle.eraserColor, width: pen.width)! }
        }
        submitPage()
        submitPen(pen)
        let ref = nextRef(author)
        nextStroke = nextStroke &+ 1 == 0 ? 1 : nextStroke &+ 1
        mirror.start(.mine, stroke: ref)
        newestOwnLine = ref.stroke
        appStroke = ref
        submit(.point(StrokePoint(stroke: ref.stroke, tool: tool, phase: .start, x: x, y: y)))
    }

    private func submitPen(_ style: PenStyle) {
        guard style != roomPen else { return }
        roomPen = style
        submit(.penStyle(style))
    }

    /// The author draws on the page the app shows.
    private func submitPage() {
        guard roomPage != shownPage else { return }
        roomPage = shownPage
        submit(.switchPage(shownPage))
    }

    private func submit(_ command: Command) {
        let ms = configuration.wallClockAtZeroMs &+ (lastInputAt ?? openedAt).microseconds / 1000
        submitted.append(TimedCommand(timeMs: ms, command: command))
        if submitted.count >= LegacySessionLimits.maxCommandsPerBatch { flushSubmitted(now: lastInputAt ?? openedAt) }
    }

    /// Hands the commands gathered so far to the room as one batch.
    func flushSubmitted(now: Instant) {
        guard !submitted.isEmpty else { return }
        emit(.submit(submitted))
        submitted = []
        unechoed += 1
    }
}
