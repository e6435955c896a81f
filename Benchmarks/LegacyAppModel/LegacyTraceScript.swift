// A recorded lesson as what the app's user does: touches, pen picks and buttons, at their times.
import InkCodec
import InkProtocol

/// The user's actions of a trace (`t_ms,message`): a point is a touch sample, `3,c,w` a pen
/// pick, `4`/`5`/`6` the undo, redo and clear buttons. Played from `start` at `speed` times
/// the recorded pace.
public struct LegacyTraceScript: Sendable {
    public struct Action: Sendable {
        public var at: Instant
        public var message: LegacyMessage
    }

    public private(set) var actions: [Action]
    private var next = 0

    public init(_ lines: [TraceLine], start: Instant, speed: Double = 1) {
        let first = lines.first?.timeMs ?? 0
        actions = lines.map { line in
            let offset = Double(line.timeMs - first) * 1000 / speed
            return Action(at: start + Instant.Duration(microseconds: UInt64(offset.rounded())), message: line.message)
        }
    }

    public var isDone: Bool { next >= actions.count }
    /// When the next action is due.
    public var nextAt: Instant? { isDone ? nil : actions[next].at }

    /// Performs every action due by `now` on `app`, in order.
    public mutating func perform(on app: HYWhiteboardApp, now: Instant) {
        while next < actions.count && actions[next].at <= now {
            LegacyTraceScript.act(actions[next].message, on: app, now: actions[next].at)
            next += 1
        }
    }

    public static func act(_ message: LegacyMessage, on app: HYWhiteboardApp, now: Instant) {
        switch message {
        case .point(_, let x, let y, let phase): app.touch(phase, x: x, y: y, now: now)
        case .penStyle(let style): app.pickPen(style, now: now)
        case .undo: app.pressUndo(now: now)
        case .redo: app.pressRedo(now: now)
        case .clear: app.pressClear(now: now)
        }
    }

    /// The screen the author's own app shows after drawing `lines` alone (no network).
    public static func referenceScreen(_ lines: [TraceLine]) -> LegacyAppScreen {
        let app = HYWhiteboardApp.offline()
        for line in lines { act(line.message, on: app, now: .zero) }
        return app.screen
    }
}
