import Foundation
import Glibc
import InkBenchSupport
import InkCodec
import InkImage
import Testing

extension WebBrowserTests {
    /// A page joining a room whose page 0 has a background (`inkwire background`, a PNG of two
    /// colours) fetches it after the strokes, checks its SHA-256 and draws it under them; a pen
    /// stroke draws over it and an eraser stroke clears the ink, never the image.
    @Test func aLateJoiningPageShowsTheBackgroundUnderItsStrokes() throws {
        let daemon = try Self.startDaemon("web-background")
        let browser = try Chromium()
        defer { browser.quit() }
        // 800 x 600 (the view's 4:3: contain fills it): red above, blue below.
        let (w, h) = (800, 600)
        var rgb = [UInt8](repeating: 0, count: w * h * 3)
        for y in 0..<h {
            for x in 0..<w {
                let i = (y * w + x) * 3
                (rgb[i], rgb[i + 1], rgb[i + 2]) = y < h / 2 ? (210, 40, 40) : (40, 60, 200)
            }
        }
        let png = try #require(ImageEncode.png(rgb: rgb, width: w, height: h))
        let file = daemon.process.dataDir + "/two-colours.png"
        writeFile(file, png)
        let set = try ClientProcess.run(["background", "--server", "tcp://127.0.0.1:\(daemon.tcp)", "--room", "bg", "--user", "t", "--image", file,
                                         "--page", "0"], directory: daemon.process.dataDir)
        #expect(set.exitStatus == 0, "\(set.errors)")

        let page = try Self.openBoard(browser, daemon, room: "bg", fragment: "user=ana&role=teacher")
        let hex = BackgroundEndToEndTests.hex(png)
        #expect(page.wait(for: "window.inkwireBoard.background.state === 'shown' && window.inkwireBoard.background.hex === '\(hex)'", timeout: 20),
                "\(String(describing: try? page.evaluate("JSON.stringify(window.inkwireBoard.background)")))")
        // A thick pen stroke across the red half, an eraser stroke across it and across the blue half.
        try Self.click(page, "#pens button:nth-child(1)")
        try Self.click(page, "#widths button:nth-child(3)")
        try Self.draw(page, (0...10).map { (0.1 + Double($0) * 0.08, 0.25) })
        try Self.click(page, "#pens button:nth-child(6)")
        try Self.draw(page, (0...8).map { (0.5, 0.1 + Double($0) * 0.1) })
        try #require(page.wait(for: "window.inkwireBoard.session.unacknowledgedCount === 0"))
        usleep(300_000)
        try page.bringToFront()
        let shot = try page.screenshot()
        let r = try Self.canvasRect(page)
        func at(_ x: Double, _ y: Double) -> (Double, Double) { (r.x + x * r.width, r.y + y * r.height) }
        let spots = [at(0.25, 0.1), at(0.75, 0.8), at(0.3, 0.25), at(0.5, 0.25), at(0.5, 0.75)]
        let px = try WebScreenshot.pixels(shot, at: spots, in: browser)
        func near(_ p: (Int, Int, Int), _ c: (Int, Int, Int)) -> Bool { abs(p.0 - c.0) < 30 && abs(p.1 - c.1) < 30 && abs(p.2 - c.2) < 30 }
        #expect(near(px[0], (210, 40, 40)), "the red half: \(px[0])")
        #expect(near(px[1], (40, 60, 200)), "the blue half: \(px[1])")
        #expect(near(px[2], (0x32, 0x6e, 0xd9)), "the pen stroke over the image: \(px[2])")
        #expect(near(px[3], (210, 40, 40)), "the eraser cleared the ink, not the image: \(px[3])")
        #expect(near(px[4], (40, 60, 200)), "the eraser over the image alone: \(px[4])")
        let room = try Self.roomDigest(daemon, room: "bg")
        #expect(try page.evaluate("window.inkwireBoard.digest") as? String == Self.digestHex(room.digest),
                "page at \(String(describing: try? page.evaluate("window.inkwireBoard.appliedThrough"))), room at \(room.roomSeq); \(String(describing: try? page.evaluate("document.getElementById('status-line').textContent")))")
    }
}
