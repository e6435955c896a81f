import InkCodec
import InkUV

/// A HYWhiteboard app watching a room through inkwired's legacy listener: one TCP stream in
/// the app's framing, the app's heartbeat (`27 11` at connect and every 3 s; inkwired drops a
/// device it hears none from for 9 s), and every received text command handed on with the time
/// it arrived. It reads with a clean accumulate-and-parse loop: it measures what the relay
/// delivers, not the app's reader defects (docs/legacy-app.md).
final class LegacyLossWatcher {
    /// The app's heartbeat interval.
    static let heartbeatIntervalMicroseconds: UInt64 = 3_000_000

    /// Called with each read's complete text commands, in order, and the arrival time (µs).
    var onMessages: ([LegacyMessage], UInt64) -> Void = { _, _ in }
    private(set) var failure: String?
    private(set) var isConnected = false

    private let loop: EventLoop
    private let heartbeat: LoopTimer
    private var connection: TCPConnection?
    private var decoder = LegacyFrameDecoder()

    init(loop: EventLoop, server: SocketAddress) throws {
        self.loop = loop
        heartbeat = try LoopTimer(loop: loop)
        connection = try TCPConnection.connect(loop: loop, to: server) { [unowned self] result in
            switch result {
            case .failure(let error):
                failure = failure ?? "legacy connect: \(error)"
            case .success(let connection):
                try? connection.setNoDelay(true)
                do {
                    try connection.startReading({ [unowned self] bytes in received(bytes) }, onEnd: { [unowned self] error in
                        failure = failure ?? "legacy stream ended: \(error.map { "\($0)" } ?? "end of stream")"
                    })
                } catch {
                    failure = failure ?? "legacy read: \(error)"
                }
                isConnected = true
                sendHeartbeat()
                heartbeat.start(afterMicroseconds: LegacyLossWatcher.heartbeatIntervalMicroseconds,
                                repeatingEveryMicroseconds: LegacyLossWatcher.heartbeatIntervalMicroseconds) { [unowned self] in sendHeartbeat() }
            }
        }
    }

    private func sendHeartbeat() {
        _ = try? connection?.write(LegacyFrame.heartbeat.bytes)
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        let now = loop.now
        var messages: [LegacyMessage] = []
        do {
            try decoder.handleBytes(bytes)
            while let frame = try decoder.pollFrame() {
                guard case .data(let command, let payload) = frame, command == LegacyFrame.textCommand else { continue }
                do {
                    messages.append(try LegacyMessage(parsing: payload))
                } catch {
                    failure = failure ?? "unreadable legacy message: \(error)"
                }
            }
        } catch {
            failure = failure ?? "legacy framing: \(error)"
        }
        if !messages.isEmpty { onMessages(messages, now) }
    }

    func close() {
        heartbeat.close()
        connection?.close()
    }
}

/// What a legacy watcher of one room must see, in order: the app's message for each of the
/// drawer's points, undos, redos and clears. Pen styles are state the relay may send again
/// or fold (it keeps the app's pen right, docs/legacy-app.md), so they are neither
/// owed nor counted.
struct LegacyExpectation {
    var messages: [LegacyMessage] = []
    /// The plan command each expected message stands for.
    var commandIndex: [Int] = []

    init(plan: LossRoomPlan) {
        for (index, timed) in plan.commands.enumerated() {
            guard let message = LegacyMessage(transcribing: timed.command) else { continue }
            if case .penStyle = message { continue }
            messages.append(message)
            commandIndex.append(index)
        }
    }

    /// Expected messages among the first `sent` plan commands.
    func owed(sent: Int) -> Int {
        var low = 0, high = commandIndex.count
        while low < high {
            let mid = (low + high) / 2
            if commandIndex[mid] < sent { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
