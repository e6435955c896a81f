// Test support for the compact binary codec: a text form of commands (used by the vector
// files) and a seeded generator of hostile-but-valid batches.
@testable import InkCodec

enum BinaryText {
    /// `T:pt:STROKE:pen|eraser:start|move|end:X:Y`, `T:pen:C:W`, `T:undo:S`, `T:redo:S`,
    /// `T:clear`, `T:erase:A:S`, `T:addpage:P`, `T:page:P`, `T:lock`, `T:unlock`,
    /// `T:present:P`, `T:bg:P:HASH:W:H:FIT` or `T:bg:P:none`, `T:unknown:KIND:HEX`.
    static func format(_ c: TimedCommand) -> String {
        let body: String
        switch c.command {
        case .point(let p):
            body = "pt:\(p.stroke.rawValue):\(p.tool == .pen ? "pen" : "eraser"):\(["", "start", "move", "end"][Int(p.phase.rawValue)]):\(p.x):\(p.y)"
        case .penStyle(let s): body = "pen:\(s.color):\(s.width)"
        case .undo(let s): body = "undo:\(s.rawValue)"
        case .redo(let s): body = "redo:\(s.rawValue)"
        case .clear: body = "clear"
        case .erase(let r): body = "erase:\(r.author.rawValue):\(r.stroke.rawValue)"
        case .addPage(let p): body = "addpage:\(p.rawValue)"
        case .switchPage(let p): body = "page:\(p.rawValue)"
        case .room(.lock): body = "lock"
        case .room(.unlock): body = "unlock"
        case .room(.presentPage(let p)): body = "present:\(p.rawValue)"
        case .background(let b):
            if let i = b.image {
                body = "bg:\(b.page.rawValue):\(i.hash.hex):\(i.width):\(i.height):\(i.fit.name)"
            } else {
                body = "bg:\(b.page.rawValue):none"
            }
        case .unknown(let k, let payload): body = "unknown:\(k.rawValue):\(hex(payload))"
        }
        return "\(c.timeMs):\(body)"
    }

    static func parse(_ token: Substring) -> TimedCommand? {
        let f = token.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard f.count >= 2, let t = UInt64(f[0]) else { return nil }
        func u32(_ i: Int) -> UInt32? { i < f.count ? UInt32(f[i]) : nil }
        let command: Command
        switch f[1] {
        case "pt":
            guard f.count == 7, let s = u32(2), let x = Int32(f[5]), let y = Int32(f[6]),
                  let phase = ["start": StrokePhase.start, "move": .move, "end": .end][f[4]] else { return nil }
            command = .point(StrokePoint(stroke: StrokeID(s), tool: f[3] == "pen" ? .pen : .eraser, phase: phase, x: x, y: y))
        case "pen":
            guard f.count == 4, let c = UInt8(f[2]), let w = UInt8(f[3]), let style = PenStyle(color: c, width: w) else { return nil }
            command = .penStyle(style)
        case "undo": guard let s = u32(2) else { return nil }; command = .undo(StrokeID(s))
        case "redo": guard let s = u32(2) else { return nil }; command = .redo(StrokeID(s))
        case "clear": command = .clear
        case "erase":
            guard let a = u32(2), let s = u32(3) else { return nil }
            command = .erase(StrokeRef(author: AuthorID(a), stroke: StrokeID(s)))
        case "addpage": guard let p = u32(2) else { return nil }; command = .addPage(PageID(p))
        case "page": guard let p = u32(2) else { return nil }; command = .switchPage(PageID(p))
        case "lock": command = .room(.lock)
        case "unlock": command = .room(.unlock)
        case "present": guard let p = u32(2) else { return nil }; command = .room(.presentPage(PageID(p)))
        case "bg":
            guard let p = u32(2) else { return nil }
            if f.count == 4 && f[3] == "none" {
                command = .background(PageBackground(page: PageID(p), image: nil))
            } else {
                guard f.count == 7, let h = BlobHash(hex: f[3]), let w = u32(4), let ht = u32(5), let fit = BackgroundFit(name: f[6]),
                      let image = BackgroundImage(hash: h, width: w, height: ht, fit: fit) else { return nil }
                command = .background(PageBackground(page: PageID(p), image: image))
            }
        case "unknown":
            guard f.count == 4, let k = UInt8(f[2]), let payload = unhex(f[3]) else { return nil }
            command = .unknown(kind: CommandKind(rawValue: k), payload: payload)
        default: return nil
        }
        return TimedCommand(timeMs: t, command: command)
    }
}

/// Seeded random batches: realistic strokes mixed with every command kind, extreme
/// coordinates, Int32 limits, off-grid and decreasing times, huge gaps, unknown kinds.
struct RandomBatches {
    var rng: SeededRandom
    var time: UInt64 = 0
    var strokes: [UInt32: (stroke: UInt32, open: Bool, x: Int32, y: Int32)] = [:]

    init(seed: UInt64) { rng = SeededRandom(seed: seed) }

    mutating func coordinate(near v: Int32) -> Int32 {
        switch Int.random(in: 0..<10, using: &rng) {
        case 0: return Int32.random(in: Int32.min...Int32.max, using: &rng)
        case 1: return [Int32.min, Int32.max, 0, -1, 1_000_000].randomElement(using: &rng)!
        case 2...3: return Int32.random(in: -1_100_000...1_100_000, using: &rng)
        default: return v &+ Int32.random(in: -20_000...20_000, using: &rng)
        }
    }

    mutating func advanceTime() -> UInt64 {
        switch Int.random(in: 0..<20, using: &rng) {
        case 0: time = UInt64.random(in: 0...UInt64.max, using: &rng)
        case 1: time = time &- UInt64.random(in: 0...5000, using: &rng)
        case 2: time = time &+ UInt64.random(in: 0...(1 << 40), using: &rng)
        case 3: time &+= UInt64.random(in: 0...7, using: &rng)
        default: time = BinaryPrediction.gridTime(BinaryPrediction.frame(min(time, 1 << 39)) + UInt64.random(in: 0...30, using: &rng))
        }
        return time
    }

    mutating func command(author: UInt32) -> TimedCommand {
        var s = strokes[author] ?? (0, false, 500_000, 500_000)
        let t = advanceTime()
        let command: Command
        switch Int.random(in: 0..<40, using: &rng) {
        case 0: command = .penStyle(PenStyle(color: UInt8.random(in: 0...5, using: &rng), width: UInt8.random(in: 1...3, using: &rng))!)
        case 1: command = .undo(StrokeID(Bool.random(using: &rng) ? s.stroke : UInt32.random(in: 0...UInt32.max, using: &rng)))
        case 2: command = .redo(StrokeID(s.stroke &- UInt32.random(in: 0...3, using: &rng)))
        case 3: command = .clear
        case 4: command = .erase(StrokeRef(author: AuthorID(UInt32.random(in: 0...UInt32.max, using: &rng)), stroke: StrokeID(UInt32.random(in: 0...9, using: &rng))))
        case 5: command = .addPage(PageID(UInt32.random(in: 0...UInt32.max, using: &rng)))
        case 6: command = .switchPage(PageID(UInt32.random(in: 0...3, using: &rng)))
        case 7: command = .room([.lock, .unlock, .presentPage(PageID(UInt32.random(in: 0...UInt32.max, using: &rng)))].randomElement(using: &rng)!)
        case 8:
            let n = Int.random(in: 0...(Bool.random(using: &rng) ? 3 : 300), using: &rng)
            command = .unknown(kind: CommandKind(rawValue: UInt8.random(in: 11...255, using: &rng)),
                               payload: (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) })
        case 9:
            // Anything: random stroke, tool and phase.
            command = .point(StrokePoint(stroke: StrokeID(UInt32.random(in: 0...UInt32.max, using: &rng)),
                                         tool: Bool.random(using: &rng) ? .pen : .eraser,
                                         phase: StrokePhase.allCases.randomElement(using: &rng)!,
                                         x: coordinate(near: s.x), y: coordinate(near: s.y)))
        default:
            let phase: StrokePhase = !s.open ? .start : (Int.random(in: 0..<8, using: &rng) == 0 ? .end : .move)
            if phase == .start { s.stroke &+= 1 }
            command = .point(StrokePoint(stroke: StrokeID(s.stroke), tool: Int.random(in: 0..<10, using: &rng) == 0 ? .eraser : .pen,
                                         phase: phase, x: coordinate(near: s.x), y: coordinate(near: s.y)))
        }
        if case .point(let p) = command {
            s = (p.stroke.rawValue, p.phase != .end, p.x, p.y)
        }
        strokes[author] = s
        return TimedCommand(timeMs: t, command: command)
    }

    mutating func batch() -> Batch {
        let author = [1, 2, 3, UInt32.max, UInt32.random(in: 0...UInt32.max, using: &rng)][Int.random(in: 0..<5, using: &rng) < 4 ? Int.random(in: 0..<3, using: &rng) : Int.random(in: 3..<5, using: &rng)]
        let n = Int.random(in: 0..<10, using: &rng) == 0 ? Int.random(in: 0...200, using: &rng) : Int.random(in: 0...6, using: &rng)
        return Batch(author: AuthorID(author), commands: (0..<n).map { _ in command(author: author) })
    }
}
