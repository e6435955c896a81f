/// Messages accepted by `send` that have not yet entered the send window, cut into segments
/// on the way out. Bounded in messages and bytes by the session's configuration.
struct SendQueue {
    private var messages: [[UInt8]] = []
    private var head = 0
    /// Bytes of the head message already cut into segments.
    private var offset = 0
    private(set) var queuedBytes = 0

    var isEmpty: Bool { head == messages.count }
    var messageCount: Int { messages.count - head }

    mutating func push(_ message: [UInt8]) {
        messages.append(message)
        queuedBytes += message.count
    }

    /// Size of the next segment's payload, if any.
    func nextSegmentSize(maxPayload: Int) -> Int? {
        guard !isEmpty else { return nil }
        return min(maxPayload, messages[head].count - offset)
    }

    /// Cuts the next segment off the head message.
    mutating func popSegment(maxPayload: Int) -> (payload: [UInt8], endOfMessage: Bool)? {
        guard !isEmpty else { return nil }
        let message = messages[head]
        let n = min(maxPayload, message.count - offset)
        // A message that fits one segment (every live batch) goes as it is: no copy.
        let payload = offset == 0 && n == message.count ? message : Array(message[offset..<offset + n])
        offset += n
        queuedBytes -= n
        let end = offset == message.count
        if end {
            messages[head] = []
            head += 1
            offset = 0
            if head == messages.count {
                // Drained (the usual state of a live session between batches): back to the
                // shared empty array. `isEmpty`, read on every `pollTransmit`, then reads a line
                // every session shares instead of this session's own buffer, a cache miss per
                // datagram with thousands of sessions; the next push allocates a small buffer.
                messages = []
                head = 0
            } else if head > 64 && head * 2 >= messages.count {
                messages.removeFirst(head)
                head = 0
            }
        }
        return (payload, end)
    }
}
