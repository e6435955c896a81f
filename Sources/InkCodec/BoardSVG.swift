// A page of a board as an SVG picture, drawn the way the HYWhiteboard app draws (and the web
// client's canvas, web/lib/render.mjs, which writes the same document byte for byte): each
// stroke one path, moving to its first point, then for each later point that differs from the
// previous one a quadratic curve with the previous point as control and the midpoint of the two
// as end. Pens: round caps and joins, width w % of the view's width. The eraser: twice as wide,
// square caps, and it clears what is below it (each eraser stroke masks everything drawn before
// it); later strokes draw over it. A pen in colour 5 (the eraser's clear colour) draws nothing.

public enum BoardSVG {
    /// The app's pen colours (HYColorPanel), by pen colour 0...4.
    public static let colors = ["#326ed9", "#306c00", "#66d552", "#ff1ecf", "#4ea1b7"]

    /// The SVG document of `strokes` (drawing order), `width` x `height` pixels on white, over
    /// the page's background image when one is given (`href`: its address, a `data:` URI for a
    /// self-contained file). The eraser clears strokes only, never the background.
    public static func document(_ strokes: [Board.Stroke], width: Int = 1024, height: Int = 768, title: String = "",
                                background: (image: BackgroundImage, href: String)? = nil) -> String {
        let visible = strokes.filter { $0.isVisible && ($0.tool == .eraser || $0.style.color < PenStyle.eraserColor) }
        var defs: [String] = []
        var body = ""
        var masks = 0
        let w = Double(width)
        let h = Double(height)
        for s in visible {
            let d = pathData(s, width: w, height: h)
            let lineWidth = number(Double(s.style.width) * w / 100 * (s.tool == .eraser ? 2 : 1))
            if s.tool == .eraser {
                masks += 1
                defs.append("<mask id=\"e\(masks)\" maskUnits=\"userSpaceOnUse\" x=\"\(-width)\" y=\"\(-height)\" width=\"\(3 * width)\" height=\"\(3 * height)\">"
                    + "<rect x=\"\(-width)\" y=\"\(-height)\" width=\"\(3 * width)\" height=\"\(3 * height)\" fill=\"#fff\"/>"
                    + "<path d=\"\(d)\" fill=\"none\" stroke=\"#000\" stroke-width=\"\(lineWidth)\" stroke-linecap=\"square\" stroke-linejoin=\"round\"/></mask>")
                body = "<g mask=\"url(#e\(masks))\">\(body)</g>"
            } else {
                body += "<path d=\"\(d)\" fill=\"none\" stroke=\"\(colors[Int(s.style.color)])\" stroke-width=\"\(lineWidth)\" stroke-linecap=\"round\" stroke-linejoin=\"round\"/>"
            }
        }
        let escaped = title.replacingAll("&", "&amp;").replacingAll("<", "&lt;")
        var under = ""
        if let background {
            let p = background.image.placement(viewWidth: w, viewHeight: h)
            let href = background.href.replacingAll("&", "&amp;").replacingAll("\"", "&quot;").replacingAll("<", "&lt;")
            under = "<svg x=\"0\" y=\"0\" width=\"\(width)\" height=\"\(height)\"><image x=\"\(number(p.x))\" y=\"\(number(p.y))\" width=\"\(number(p.width))\" height=\"\(number(p.height))\" preserveAspectRatio=\"none\" href=\"\(href)\"/></svg>"
        }
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\">"
            + (escaped.isEmpty ? "" : "<title>\(escaped)</title>")
            + (defs.isEmpty ? "" : "<defs>\(defs.joined())</defs>")
            + "<rect width=\"\(width)\" height=\"\(height)\" fill=\"#fff\"/>\(under)\(body)</svg>\n"
    }

    /// The path data of one stroke, coordinates in pixels rounded to 1/100.
    public static func pathData(_ s: Board.Stroke, width: Double, height: Double) -> String {
        guard let first = s.points.first else { return "" }
        let sx = width / 1_000_000
        let sy = height / 1_000_000
        var cx = Double(first.x) * sx
        var cy = Double(first.y) * sy
        var d = "M\(number(cx)) \(number(cy))"
        for p in s.points.dropFirst() {
            let x = Double(p.x) * sx
            let y = Double(p.y) * sy
            if x != cx || y != cy {
                d += "Q\(number(cx)) \(number(cy)) \(number((cx + x) / 2)) \(number((cy + y) / 2))"
            }
            cx = x
            cy = y
        }
        return d
    }

    /// A number as JavaScript prints Math.round(v * 100) / 100: no exponent, no trailing zeros.
    static func number(_ v: Double) -> String {
        let hundredths = Int64((v * 100 + 0.5).rounded(.down))
        let negative = hundredths < 0
        let magnitude = negative ? -hundredths : hundredths
        var text = String(magnitude / 100)
        let fraction = magnitude % 100
        if fraction != 0 {
            text += fraction % 10 == 0 ? ".\(fraction / 10)" : (fraction < 10 ? ".0\(fraction)" : ".\(fraction)")
        }
        return negative && magnitude != 0 ? "-" + text : text
    }
}

extension String {
    fileprivate func replacingAll(_ target: Character, _ replacement: String) -> String {
        var out = ""
        for c in self { if c == target { out += replacement } else { out.append(c) } }
        return out
    }
}
