// fuzz-modules: InkLegacy
// A LegacySession driven by a script read from the input: app reads (raw bytes), other
// authors' batches of any command, its own batches coming back, and time passing. Whatever
// happens, it never traps, and what it writes at any instant is whole 1030-byte chunks of
// frames the app reads without a crash, every line it starts ended by the end of that instant
// (the app locks its user out while a received line is open).

private struct Script {
    var bytes: [UInt8]
    var at = 0
    mutating func next() -> UInt8? {
        guard at < bytes.count else { return nil }
        defer { at += 1 }
        return bytes[at]
    }
    mutating func int(_ bound: Int) -> Int { Int(next() ?? 0) % max(bound, 1) }
}

private func command(_ s: inout Script) -> Command {
    let stroke = StrokeID(UInt32(s.int(6)))
    switch s.int(12) {
    case 0, 1, 2, 3:
        let phase: StrokePhase = [.start, .move, .move, .end][s.int(4)]
        let tool: Tool = s.int(8) == 0 ? .eraser : .pen
        return .point(StrokePoint(stroke: stroke, tool: tool, phase: phase, x: Int32(s.int(256)) * 4000, y: Int32(s.int(256)) * 4000))
    case 4: return .penStyle(PenStyle(color: UInt8(s.int(6)), width: UInt8(1 + s.int(3)))!)
    case 5: return .undo(stroke)
    case 6: return .redo(stroke)
    case 7: return s.int(4) == 0 ? .clear : .erase(StrokeRef(author: AuthorID(UInt32(1 + s.int(3))), stroke: stroke))
    case 8: return .addPage(PageID(UInt32(s.int(3))))
    case 9: return .switchPage(PageID(UInt32(s.int(3))))
    case 10: return .room([.lock, .unlock, .presentPage(PageID(UInt32(s.int(3))))][s.int(3)])
    default: return .unknown(kind: CommandKind(rawValue: 200), payload: [1])
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func legacySessionFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var s = Script(bytes: Array(UnsafeBufferPointer(start: data, count: size)))
    let me = AuthorID(3)
    let session = LegacySession(now: .zero)
    var now = Instant.zero
    var pendingOwn: [[TimedCommand]] = []
    var joined = false
    var open = false
    while let op = s.next() {
        switch op % 6 {
        case 0:
            if !joined {
                var board = Board()
                for _ in 0..<s.int(8) { board.apply(command(&s), author: AuthorID(UInt32(1 + s.int(2)))) }
                session.handleJoined(author: me, board: board, now: now)
                joined = true
            }
        case 1:
            // A read of the app: text frames it could send, or raw bytes.
            var read: [UInt8] = []
            for _ in 0..<(1 + s.int(6)) {
                if s.int(4) == 0 {
                    for _ in 0..<s.int(8) { read.append(s.next() ?? 0) }
                } else {
                    switch s.int(6) {
                    case 0: read += LegacyFrame.heartbeat.bytes
                    case 1: read += LegacyFrame.text(.penStyle(PenStyle(color: UInt8(s.int(6)), width: UInt8(1 + s.int(3)))!)).bytes
                    case 2: read += LegacyFrame.text([.undo, .redo, .clear][s.int(3)]).bytes
                    default:
                        let phase: StrokePhase = [.start, .move, .end][s.int(3)]
                        read += LegacyFrame.text(.point(tool: .pen, x: Int32(s.int(256)) * 4000, y: Int32(s.int(256)) * 4000, phase: phase)).bytes
                    }
                }
            }
            session.handleBytes(read, now: now)
        case 2:
            if joined {
                var commands: [TimedCommand] = []
                for _ in 0..<(1 + s.int(5)) { commands.append(TimedCommand(timeMs: 0, command: command(&s))) }
                session.handleRoomBatch(author: AuthorID(UInt32(1 + s.int(2))), commands: commands, own: false, now: now)
            }
        case 3:
            if joined, !pendingOwn.isEmpty { session.handleRoomBatch(author: me, commands: pendingOwn.removeFirst(), own: true, now: now) }
        case 4:
            now = now + .milliseconds(UInt64(s.int(256)) * 10)
            session.handleTimeout(now: now)
        default:
            break
        }
        while let event = session.pollEvent() {
            if case .submit(let commands) = event { pendingOwn.append(commands) }
            if case .close = event { return 0 }
        }
        while let chunk = session.pollTransmit(now: now) {
            guard chunk.count == LegacySessionLimits.chunkBytes else { fatalError("chunk of \(chunk.count) bytes") }
            var decoder = LegacyFrameDecoder()
            do {
                try decoder.handleBytes(chunk)
                while let frame = try decoder.pollFrame() {
                    guard case .data(_, let payload) = frame, !payload.allSatisfy({ $0 == UInt8(ascii: "0") }) else { continue }
                    guard let message = try? LegacyMessage(parsing: payload) else { fatalError("unreadable frame") }
                    if case .point(_, _, _, let phase) = message {
                        if phase != .start && !open { fatalError("a point outside a line the session started") }
                        open = phase != .end
                    }
                }
            } catch {
                fatalError("chunk does not decode: \(error)")
            }
            guard decoder.bufferedByteCount == 0 else { fatalError("a frame crosses a chunk") }
        }
        if open { fatalError("a line left open at the end of an instant") }
    }
    return 0
}
