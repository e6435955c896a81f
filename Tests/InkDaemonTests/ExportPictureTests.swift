import Glibc
import InkCodec
import InkProtocol
import Testing

/// `inkwire export --format svg|png` against the real daemon: the picture of a page, and of the
/// board at a time of the lesson, drawn as `BoardSVG` (and the web page) draws it.
@Suite struct ExportPictureTests {
    @Test func svgOfThePageAndOfAnEarlierTime() throws {
        let daemon = try DaemonProcess(["--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0"], tag: "export-svg")
        let tcp = DaemonProcess.port(try daemon.ready()["tcp"])!
        let device = try NativeTestClient(.tcp, port: tcp)
        device.join(room: "pic", user: "teacher", role: .teacher)
        guard case .joinAccepted(let me, _, _, _)? = device.next(where: { if case .joinAccepted = $0 { true } else { false } }) else {
            Issue.record("no join")
            return
        }
        // Two strokes (sendBatch stamps a batch's commands 0, 1, 2... ms), the second erased in part.
        let first: [Command] = [.penStyle(PenStyle(color: 1, width: 2)!),
                                .point(StrokePoint(stroke: StrokeID(1), phase: .start, x: 100_000, y: 100_000)),
                                .point(StrokePoint(stroke: StrokeID(1), phase: .move, x: 300_000, y: 200_000)),
                                .point(StrokePoint(stroke: StrokeID(1), phase: .end, x: 500_000, y: 150_000))]
        device.sendBatch(first, originSeq: 1, author: me)
        let second: [Command] = [.penStyle(PenStyle(color: 5, width: 1)!),
                                 .point(StrokePoint(stroke: StrokeID(2), tool: .eraser, phase: .start, x: 200_000, y: 120_000)),
                                 .point(StrokePoint(stroke: StrokeID(2), tool: .eraser, phase: .end, x: 250_000, y: 180_000))]
        device.sendBatch(second, originSeq: 2, author: me)
        _ = device.next(where: { if case .batchAck(2, _) = $0 { true } else { false } })
        var board = Board()
        board.apply(Batch(author: me, commands: first.prefix(3).enumerated().map { TimedCommand(timeMs: UInt64($0.offset), command: $0.element) }))
        let earlier = BoardSVG.document(board.strokes(on: .first), width: 400, height: 300, title: "page 0 at 2 ms")
        board = Board()
        board.apply(Batch(author: me, commands: first.enumerated().map { TimedCommand(timeMs: UInt64($0.offset), command: $0.element) }))
        board.apply(Batch(author: me, commands: second.enumerated().map { TimedCommand(timeMs: UInt64($0.offset), command: $0.element) }))
        let now = BoardSVG.document(board.strokes(on: .first), width: 400, height: 300, title: "page 0")
        let server = "tcp://127.0.0.1:\(tcp)"
        let whole = try ClientProcess.run(["export", "--server", server, "--room", "pic", "--format", "svg", "--width", "400"], directory: daemon.dataDir)
        #expect(whole.exitStatus == 0, "\(whole.errors)")
        #expect(whole.output == now)
        // Lesson times as the trace export gives them (never decreasing): at 2 ms the first stroke
        // has two points; the second batch (stamped 0-2 ms, after the first's 3) comes later.
        let at = try ClientProcess.run(["export", "--server", server, "--room", "pic", "--format", "svg", "--width", "400", "--at", "2ms"],
                                       directory: daemon.dataDir)
        #expect(at.output == earlier, "\(at.output)")
        #expect(try ClientProcess.run(["export", "--server", server, "--room", "pic", "--format", "svg", "--page", "7"], directory: daemon.dataDir).exitStatus == 1)
        guard access("/usr/bin/rsvg-convert", X_OK) == 0 else {
            print("ExportPictureTests: rsvg-convert (librsvg2-bin) not installed; PNG export not checked")
            return
        }
        let png = daemon.dataDir + "/board.png"
        let raster = try ClientProcess.run(["export", "--server", server, "--room", "pic", "--format", "png", "--width", "400", "--out", png],
                                           directory: daemon.dataDir)
        #expect(raster.exitStatus == 0, "\(raster.errors)")
        let bytes = readFile(png)
        #expect(bytes.prefix(8) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        // IHDR: width and height, big-endian, at bytes 16-23.
        let width = bytes.count > 24 ? bytes[16..<20].reduce(0) { $0 << 8 | Int($1) } : 0
        let height = bytes.count > 24 ? bytes[20..<24].reduce(0) { $0 << 8 | Int($1) } : 0
        #expect(width == 400 && height == 300)
    }
}
