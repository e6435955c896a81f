// The room's storage may refuse a batch before it is numbered: the daemon's say, asked per batch.
import InkProtocol

/// Asked once per batch that passed every other check (decoded, not a duplicate, allowed),
/// just before it would get its `roomSeq`: the daemon answers from its store (history size
/// limit, storage backlog full). A refusal reaches the author as an `error` with the given code
/// and text; the batch is not numbered, not stored and not relayed, so no member ever sees a
/// batch the log will not keep.
public protocol BatchAdmission: AnyObject {
    /// nil admits; `bytes` is the payload the store would keep (the canonical encoding).
    func admit(room: String, bytes: Int) -> BatchRefusal?
}

/// Why a room does not take a batch now.
public struct BatchRefusal: Hashable, Sendable {
    public var code: SessionErrorCode
    public var text: String
    public init(_ code: SessionErrorCode, _ text: String) {
        self.code = code
        self.text = text
    }
}

extension Relay {
    /// Forgets a room nobody is in (idle expiry: the daemon deleted its history). Returns false,
    /// and keeps the room, while a session is joined to it.
    @discardableResult
    public func forgetRoom(_ name: String) -> Bool {
        guard let room = rooms[name] else { return true }
        guard room.sessions.isEmpty else { return false }
        rooms[name] = nil
        return true
    }
}
