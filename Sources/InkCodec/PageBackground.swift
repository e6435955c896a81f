// A page's background: an image (a content-addressed blob) drawn under the strokes.

/// The SHA-256 of a blob's bytes: how a background names its image. The codec only carries it;
/// hashing happens where a primitive is (the daemon and devices inject one, docs/protocol.md 6a).
public struct BlobHash: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let byteCount = 32
    /// Exactly `byteCount` bytes.
    public let bytes: [UInt8]

    public init?(_ bytes: [UInt8]) {
        guard bytes.count == BlobHash.byteCount else { return nil }
        self.bytes = bytes
    }

    /// 64 lowercase hex digits.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 2 * BlobHash.byteCount else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(BlobHash.byteCount)
        var i = 0
        while i < digits.count {
            guard let hi = BlobHash.nibble(digits[i]), let lo = BlobHash.nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        self.bytes = out
    }

    public var hex: String {
        let table = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(2 * bytes.count)
        for b in bytes {
            out.append(table[Int(b >> 4)])
            out.append(table[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    public static func < (a: BlobHash, b: BlobHash) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

/// How a background image is placed in the page's normalized 4:3 view.
public enum BackgroundFit: UInt8, Hashable, Sendable, CaseIterable {
    /// The whole image, scaled to fit inside the view and centred (bands where ratios differ).
    case contain = 1
    /// The view filled, the image scaled to cover it and centred (the excess cut off).
    case cover = 2
    /// The image stretched to the view.
    case stretch = 3

    public var name: String {
        switch self {
        case .contain: "contain"
        case .cover: "cover"
        case .stretch: "stretch"
        }
    }

    public init?(name: String) {
        guard let fit = BackgroundFit.allCases.first(where: { $0.name == name }) else { return nil }
        self = fit
    }
}

/// The image of a background: its blob, its size in pixels, and how it fits the view.
public struct BackgroundImage: Hashable, Sendable {
    /// Largest width or height, in pixels.
    public static let maxSidePixels: UInt32 = 16_384

    public var hash: BlobHash
    public var width: UInt32
    public var height: UInt32
    public var fit: BackgroundFit

    /// Nil when a side is 0 or past `maxSidePixels`.
    public init?(hash: BlobHash, width: UInt32, height: UInt32, fit: BackgroundFit = .contain) {
        guard (1...BackgroundImage.maxSidePixels).contains(width), (1...BackgroundImage.maxSidePixels).contains(height) else { return nil }
        self.hash = hash
        self.width = width
        self.height = height
        self.fit = fit
    }

    /// Where the image goes in a view of `viewWidth` x `viewHeight`: x, y, width, height.
    public func placement(viewWidth: Double, viewHeight: Double) -> (x: Double, y: Double, width: Double, height: Double) {
        let w = Double(width), h = Double(height)
        switch fit {
        case .stretch: return (0, 0, viewWidth, viewHeight)
        case .contain, .cover:
            let sx = viewWidth / w, sy = viewHeight / h
            let s = fit == .contain ? min(sx, sy) : max(sx, sy)
            let pw = w * s, ph = h * s
            return ((viewWidth - pw) / 2, (viewHeight - ph) / 2, pw, ph)
        }
    }
}

/// The `background` command (kind 10): sets (or, with no image, removes) a page's background.
public struct PageBackground: Hashable, Sendable {
    public var page: PageID
    public var image: BackgroundImage?

    public init(page: PageID, image: BackgroundImage?) {
        self.page = page
        self.image = image
    }

    /// The command's payload (docs/protocol.md 1): `page:varint`, then `0` (no image) or `1`
    /// `hash[32] width:varint height:varint fit:u8`. The binary codec carries it in its opaque
    /// form (kind 14 with kind number 10), so a decoder that predates backgrounds keeps it as
    /// `Command.unknown` and relays it unchanged.
    public var payload: [UInt8] {
        var out: [UInt8] = []
        PageBackground.putVarint(UInt64(page.rawValue), &out)
        guard let image else {
            out.append(0)
            return out
        }
        out.append(1)
        out += image.hash.bytes
        PageBackground.putVarint(UInt64(image.width), &out)
        PageBackground.putVarint(UInt64(image.height), &out)
        out.append(image.fit.rawValue)
        return out
    }

    /// Nil for a payload that is not exactly one well-formed background (minimal varints only,
    /// nothing after it).
    public init?(payload: [UInt8]) {
        var i = 0
        guard let page = PageBackground.getVarint(payload, &i), page <= UInt64(UInt32.max), i < payload.count else { return nil }
        let flag = payload[i]
        i += 1
        switch flag {
        case 0:
            guard i == payload.count else { return nil }
            self.init(page: PageID(UInt32(page)), image: nil)
        case 1:
            guard payload.count - i >= BlobHash.byteCount, let hash = BlobHash(Array(payload[i..<i + BlobHash.byteCount])) else { return nil }
            i += BlobHash.byteCount
            guard let w = PageBackground.getVarint(payload, &i), let h = PageBackground.getVarint(payload, &i),
                  w <= UInt64(UInt32.max), h <= UInt64(UInt32.max), i + 1 == payload.count,
                  let fit = BackgroundFit(rawValue: payload[i]),
                  let image = BackgroundImage(hash: hash, width: UInt32(w), height: UInt32(h), fit: fit) else { return nil }
            self.init(page: PageID(UInt32(page)), image: image)
        default:
            return nil
        }
    }

    private static func putVarint(_ v: UInt64, _ out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// LEB128, at most 10 bytes, minimal form only.
    private static func getVarint(_ bytes: [UInt8], _ i: inout Int) -> UInt64? {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count, shift < 64 {
            let b = bytes[i]
            i += 1
            if shift == 63 && b > 1 { return nil }
            v |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 {
                if b == 0 && shift > 0 { return nil }
                return v
            }
            shift += 7
        }
        return nil
    }
}
