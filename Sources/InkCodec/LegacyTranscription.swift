// One author's model commands written back as that author's own legacy messages.

extension LegacyMessage {
    /// The legacy message a legacy author would have sent for `command`, or nil when legacy has
    /// no such message (erase, pages, room commands, backgrounds, unknown kinds). Undo and redo lose their
    /// target: exact for commands made by `LegacyTranslator.command(from:)`, which is what
    /// traces, `inkwire codec` and `inkwire watch` need. What a connected app must receive
    /// for other authors' commands is `LegacySession`'s to decide (InkLegacy).
    public init?(transcribing command: Command) {
        switch command {
        case .point(let p): self = .point(tool: p.tool, x: p.x, y: p.y, phase: p.phase)
        case .penStyle(let style): self = .penStyle(style)
        case .undo: self = .undo
        case .redo: self = .redo
        case .clear: self = .clear
        case .erase, .addPage, .switchPage, .room, .background, .unknown: return nil
        }
    }
}
