// Commands with their time, and the unit an author sends and the room log stores.

/// A command and when it was made, in milliseconds since the session (or lesson) began.
/// Times let a remote device draw a stroke at the pace it was drawn and a lesson be replayed.
public struct TimedCommand: Hashable, Sendable {
    public var timeMs: UInt64
    public var command: Command

    public init(timeMs: UInt64, command: Command) {
        self.timeMs = timeMs
        self.command = command
    }
}

/// Commands of one author, in order: what a device sends at once and the room log appends.
public struct Batch: Hashable, Sendable {
    /// Decoders reject batches with more commands than this.
    public static let maxCommands = 65_536
    /// A live sender flushes what it has every this many milliseconds (as the legacy app does).
    public static let liveFlushMs: UInt64 = 60

    public var author: AuthorID
    public var commands: [TimedCommand]

    public init(author: AuthorID, commands: [TimedCommand]) {
        self.author = author
        self.commands = commands
    }

    /// Cuts one author's commands into the batches a live sender produces: consecutive commands
    /// whose times fall in the same `windowMs` window (time / windowMs) go together, at most
    /// `maxCommands` per batch. Order is kept, so concatenating the batches gives `commands` back.
    public static func cut(_ commands: [TimedCommand], author: AuthorID, windowMs: UInt64 = liveFlushMs) -> [Batch] {
        let window = max(windowMs, 1)
        var batches: [Batch] = []
        var current: [TimedCommand] = []
        var currentWindow: UInt64 = 0
        for command in commands {
            let w = command.timeMs / window
            if !current.isEmpty && (w != currentWindow || current.count == maxCommands) {
                batches.append(Batch(author: author, commands: current))
                current = []
            }
            if current.isEmpty { currentWindow = w }
            current.append(command)
        }
        if !current.isEmpty { batches.append(Batch(author: author, commands: current)) }
        return batches
    }
}
