// How much of a room's log a compacted snapshot would drop: the daemon's cue to compact.
import InkCodec

/// Points the room's log took since its last `Relay.snapshotRecord`, and points of strokes
/// deleted since then: by a `clear`, an `erase`, or a new stroke that discards its author's
/// redo stack (undone strokes that can no longer be redone). A snapshot
/// (`Board.snapshotBatches`) carries none of the deleted strokes, so when `discardedPoints`
/// nears `loggedPoints` most of what the log holds since the snapshot is no longer needed.
public struct RoomGarbage: Hashable, Sendable {
    public var loggedPoints = 0
    public var discardedPoints = 0
    public init(loggedPoints: Int = 0, discardedPoints: Int = 0) {
        self.loggedPoints = loggedPoints
        self.discardedPoints = discardedPoints
    }
}

extension RoomState {
    /// Folds `batch` into the board command by command (as `Board.apply(_:)` does), counting
    /// the points it logs and the points of the strokes it deletes.
    func fold(_ batch: Batch) {
        let author = batch.author
        for timed in batch.commands {
            switch timed.command {
            case .point(let point):
                garbage.loggedPoints += 1
                if board.stroke(StrokeRef(author: author, stroke: point.stroke)) == nil {
                    for undone in board.author(author).redoStack {
                        garbage.discardedPoints += board.stroke(StrokeRef(author: author, stroke: undone))?.points.count ?? 0
                    }
                }
            case .erase(let ref):
                garbage.discardedPoints += board.stroke(ref)?.points.count ?? 0
            case .clear:
                garbage.discardedPoints += board.strokes(on: board.author(author).page).reduce(0) { $0 + $1.points.count }
            default:
                break
            }
            board.apply(timed.command, author: author)
        }
    }
}

extension Relay {
    /// What the room's log holds since its last `snapshotRecord` that a snapshot would drop
    /// (nil for an unknown room).
    public func garbageSinceSnapshot(_ room: String) -> RoomGarbage? { rooms[room]?.garbage }
}
