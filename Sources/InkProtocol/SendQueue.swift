/// Messages accepted by `send` that have not yet entered the send window, cut into segments
/// on the way out. Bounded in messages and bytes by the session's configuration.
///
/// The head message is held inline (`front`), the rest in an array: a live session queues one
/// message at a time and sends it at once, so the usual push and pop touch no array buffer
/// (a buffer allocated and freed for every message, and a cache miss on it, per delivery).
struct SendQueue {
    /// The head message, when `hasFront`.
    private var front: [UInt8] = []
    private var hasFront = false
    /// Messages after `front`, from `head` on.
    private var rest: [[UInt8]] = []
    private var head = 0
    /// Bytes of the head message already cut into segments.
    private var offset = 0
    private(set) var queuedBytes = 0

    var isEmpty: Bool { !hasFront }
    var messageCount: Int { hasFront ? 1 + rest.count - head : 0 }

    mutating func push(_ message: [UInt8]) {
        if hasFront {
            rest.append(message)
        } else {
            front = message
            hasFront = true
        }
        queuedBytes += message.count
    }

    /// Size of the next segment's payload, if any.
    func nextSegmentSize(maxPayload: Int) -> Int? {
        guard hasFront else { return nil }
        return min(maxPayload, front.count - offset)
    }

    /// Cuts the next segment off the head message.
    mutating func popSegment(maxPayload: Int) -> (payload: [UInt8], endOfMessage: Bool)? {
        guard hasFront else { return nil }
        let n = min(maxPayload, front.count - offset)
        // A message that fits one segment (every live batch) goes as it is: no copy.
        let payload = offset == 0 && n == front.count ? front : Array(front[offset..<offset + n])
        offset += n
        queuedBytes -= n
        let end = offset == front.count
        if end {
            offset = 0
            advance()
        }
        return (payload, end)
    }

    /// The head message is sent: the next one moves up.
    private mutating func advance() {
        guard head < rest.count else {
            front = []
            hasFront = false
            return
        }
        front = rest[head]
        rest[head] = []
        head += 1
        if head == rest.count {
            // Drained: back to the shared empty array (see the type's comment).
            rest = []
            head = 0
        } else if head > 64 && head * 2 >= rest.count {
            rest.removeFirst(head)
            head = 0
        }
    }
}
