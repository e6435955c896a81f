// A board as a compacted command sequence: what a late joiner folds instead of the whole log.

extension Board {
    /// Author of the room-level commands of a snapshot (`addPage`, `room(...)`), which touch no
    /// author state. The relay never gives a member this id.
    public static let snapshotRoomAuthor = AuthorID(0)

    /// Batches (times 0, at most `maxCommandsPerBatch` commands each) that fold, from an empty
    /// board, to a board with the same `digest` as this one: pages, strokes in drawing order with
    /// their pen, page and tool, every author's undo and redo stacks (order included), pens,
    /// pages, the presented page and the lock. Undone strokes stay (a redo may show them again);
    /// deleted strokes and the commands that only moved state back and forth are gone.
    ///
    /// How the stacks come out exact: creating strokes in drawing order leaves each author's
    /// undo stack in creation order with an empty redo stack; then undos and redos reorder them.
    /// An author's undo plus redo stacks never hold more than `maxUndoDepth` strokes (only a
    /// creation adds to them, and it empties the redo stack), so every undone stroke is on the
    /// redo stack and only creations push visible strokes off the undo stack. Strokes that must
    /// stay on a stack are moved to its top (undo+redo) before a creation would push them off,
    /// and visible strokes that must be off it are pushed off with placeholder strokes, erased
    /// right after. Limit: on a board holding `maxStrokes` strokes, placeholders cannot be made.
    public func snapshotBatches(maxCommandsPerBatch: Int = 4096) -> [Batch] {
        var out = SnapshotWriter(maxCommands: max(1, maxCommandsPerBatch))
        for page in pages.dropFirst() { out.emit(.addPage(page), by: Board.snapshotRoomAuthor) }
        for page in pages {
            if let image = backgrounds[page] { out.emit(.background(PageBackground(page: page, image: image)), by: Board.snapshotRoomAuthor) }
        }

        let authorIDs = authors.keys.sorted()
        var sims: [AuthorID: SimAuthor] = [:]
        for id in authorIDs {
            let target = authors[id]!
            sims[id] = SimAuthor(needed: Set(target.undoStack).union(target.redoStack))
        }
        // Phase 1: every stroke, in drawing order.
        for ref in order {
            let stroke = strokes[ref]!
            var sim = sims[ref.author] ?? SimAuthor(needed: [])
            if sim.pen != stroke.style {
                out.emit(.penStyle(stroke.style), by: ref.author)
                sim.pen = stroke.style
            }
            if sim.page != stroke.page {
                out.emit(.switchPage(stroke.page), by: ref.author)
                sim.page = stroke.page
            }
            sim.keepNeededOnStack(before: ref.author, &out)
            let last = stroke.points.count - 1
            for (i, p) in stroke.points.enumerated() {
                let phase: StrokePhase = i == last && stroke.isEnded ? .end : (i == 0 ? .start : .move)
                out.emit(.point(StrokePoint(stroke: ref.stroke, tool: stroke.tool, phase: phase, x: p.x, y: p.y)), by: ref.author)
            }
            sim.created(ref.stroke)
            sims[ref.author] = sim
        }
        // Phase 2: each author's stacks, pen and page.
        for id in authorIDs {
            let target = authors[id]!
            var sim = sims[id]!
            let used = Set(order.lazy.filter { $0.author == id }.map(\.stroke))
            sim.pushOffUnneeded(author: id, used: used, &out)
            if sim.undo != target.undoStack || !target.redoStack.isEmpty {
                // Our stack holds exactly the target's undo and redo strokes. Undo the undo-stack
                // ones, then the redo-stack ones in order; redoing the former in order leaves
                // both stacks exactly as the target's.
                for s in target.undoStack { out.emit(.undo(s), by: id) }
                for s in target.redoStack { out.emit(.undo(s), by: id) }
                for s in target.undoStack { out.emit(.redo(s), by: id) }
                sim.undo = target.undoStack
            }
            if sim.pen != target.pen { out.emit(.penStyle(target.pen), by: id) }
            if sim.page != target.page { out.emit(.switchPage(target.page), by: id) }
        }
        if let page = presentedPage { out.emit(.room(.presentPage(page)), by: Board.snapshotRoomAuthor) }
        if isLocked { out.emit(.room(.lock), by: Board.snapshotRoomAuthor) }
        return out.finish()
    }
}

/// One author's state while the snapshot is written: what folding it so far gives.
private struct SimAuthor {
    var pen = PenStyle.initial
    var page = PageID.first
    /// The undo stack (the redo stack stays empty until phase 2).
    var undo: [StrokeID] = []
    /// Strokes the final undo or redo stack holds: they must never be pushed off.
    let needed: Set<StrokeID>

    init(needed: Set<StrokeID>) { self.needed = needed }

    /// Before a creation pushes the bottom entry off a full stack, moves needed strokes from the
    /// bottom to the top (undo then redo: no visible change).
    mutating func keepNeededOnStack(before author: AuthorID, _ out: inout SnapshotWriter) {
        guard undo.count >= Board.maxUndoDepth else { return }
        var turns = 0
        while let bottom = undo.first, needed.contains(bottom), turns < undo.count {
            out.emit(.undo(bottom), by: author)
            out.emit(.redo(bottom), by: author)
            undo.removeFirst()
            undo.append(bottom)
            turns += 1
        }
    }

    mutating func created(_ id: StrokeID) {
        undo.append(id)
        if undo.count > Board.maxUndoDepth { undo.removeFirst() }
    }

    /// Pushes visible strokes that the target has off the stack off ours too, with placeholder
    /// strokes (ids the author does not use) erased afterwards.
    mutating func pushOffUnneeded(author: AuthorID, used: Set<StrokeID>, _ out: inout SnapshotWriter) {
        guard undo.contains(where: { !needed.contains($0) }) else { return }
        var placeholders: [StrokeID] = []
        var next = UInt32.max
        var placeholderSet: Set<StrokeID> = []
        while undo.contains(where: { !needed.contains($0) && !placeholderSet.contains($0) }) {
            if undo.count >= Board.maxUndoDepth, let bottom = undo.first, needed.contains(bottom) {
                keepNeededOnStack(before: author, &out)
                continue
            }
            while used.contains(StrokeID(next)) { next -= 1 }
            let id = StrokeID(next)
            next -= 1
            out.emit(.point(StrokePoint(stroke: id, tool: .pen, phase: .end, x: 0, y: 0)), by: author)
            placeholders.append(id)
            placeholderSet.insert(id)
            created(id)
        }
        for id in placeholders { out.emit(.erase(StrokeRef(author: author, stroke: id)), by: author) }
        undo.removeAll { placeholderSet.contains($0) }
    }
}

/// Groups commands into batches of one author each, bounded in length.
struct SnapshotWriter {
    let maxCommands: Int
    private var batches: [Batch] = []
    private var current: Batch? = nil

    init(maxCommands: Int) { self.maxCommands = maxCommands }

    mutating func emit(_ command: Command, by author: AuthorID) {
        if let c = current, c.author != author || c.commands.count >= maxCommands {
            batches.append(c)
            current = nil
        }
        if current == nil { current = Batch(author: author, commands: []) }
        current!.commands.append(TimedCommand(timeMs: 0, command: command))
    }

    mutating func finish() -> [Batch] {
        if let c = current { batches.append(c) }
        current = nil
        return batches
    }
}
