// Whether bytes are an image a board can show: a JPEG or PNG that decodes completely, within
// pixel bounds. Decoded with Debian's libturbojpeg and libpng through their error-returning
// APIs (TurboJPEG, libpng's simplified API), so a bad image is an error value, never a longjmp.
import CPNG
import CTurboJPEG

public enum ImageFormat: String, Sendable {
    case jpeg
    case png

    public var mimeType: String { self == .jpeg ? "image/jpeg" : "image/png" }
    public var fileExtension: String { self == .jpeg ? "jpg" : "png" }
}

public struct ImageInfo: Hashable, Sendable {
    public var format: ImageFormat
    public var width: UInt32
    public var height: UInt32

    public init(format: ImageFormat, width: UInt32, height: UInt32) {
        self.format = format
        self.width = width
        self.height = height
    }
}

public enum ImageCheckError: Error, Equatable, CustomStringConvertible {
    /// Neither the JPEG nor the PNG signature.
    case notAnImage
    /// Width or height 0, a side past `ImageCheck.maxSidePixels`, or more than `maxPixels`.
    case tooLarge(width: UInt32, height: UInt32)
    /// The decoder refused it (truncated, corrupt, unsupported); its message.
    case undecodable(ImageFormat, String)

    public var description: String {
        switch self {
        case .notAnImage: "not a JPEG or PNG image"
        case let .tooLarge(w, h): "image of \(w)x\(h) pixels is past the bounds (sides 1...\(ImageCheck.maxSidePixels), \(ImageCheck.maxPixels) pixels)"
        case let .undecodable(format, message): "\(format.rawValue) does not decode: \(message)"
        }
    }
}

public enum ImageCheck {
    /// Largest width or height (the board model's `BackgroundImage.maxSidePixels`).
    public static let maxSidePixels: UInt32 = 16_384
    /// Most pixels: a 25-megapixel photo; a PNG is decoded to one byte a pixel to check it, so
    /// this bounds the check's memory (25 MB) as well.
    public static let maxPixels: UInt64 = 25_000_000

    /// The format by signature, without decoding.
    public static func format(of bytes: [UInt8]) -> ImageFormat? {
        if bytes.count >= 3, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes[2] == 0xFF { return .jpeg }
        if bytes.count >= 8, bytes.prefix(8).elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        return nil
    }

    /// Decodes the whole image (a JPEG at 1/8 scale: every entropy-coded byte is read, the
    /// output is small) and returns its format and size, or why it is refused.
    public static func check(_ bytes: [UInt8]) -> Result<ImageInfo, ImageCheckError> {
        switch format(of: bytes) {
        case .jpeg: checkJPEG(bytes)
        case .png: checkPNG(bytes)
        case nil: .failure(.notAnImage)
        }
    }

    private static func bounded(_ w: UInt32, _ h: UInt32) -> Bool {
        w >= 1 && h >= 1 && w <= maxSidePixels && h <= maxSidePixels && UInt64(w) * UInt64(h) <= maxPixels
    }

    private static func checkJPEG(_ bytes: [UInt8]) -> Result<ImageInfo, ImageCheckError> {
        guard let handle = tjInitDecompress() else { return .failure(.undecodable(.jpeg, "no decoder")) }
        defer { tjDestroy(handle) }
        var w: Int32 = 0, h: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = bytes.withUnsafeBufferPointer { buf in
            tjDecompressHeader3(handle, buf.baseAddress, UInt(buf.count), &w, &h, &subsampling, &colorspace)
        }
        guard header == 0 else { return .failure(.undecodable(.jpeg, message(handle))) }
        guard w > 0, h > 0, bounded(UInt32(w), UInt32(h)) else { return .failure(.tooLarge(width: UInt32(max(0, w)), height: UInt32(max(0, h)))) }
        // 1/8 scale, rounded up as TJSCALED does.
        let sw = (w + 7) / 8, sh = (h + 7) / 8
        var out = [UInt8](repeating: 0, count: Int(sw) * Int(sh))
        // Warnings (a truncated stream libjpeg would pad) are errors; progressive scans are
        // limited (TurboJPEG's guard against a scan bomb).
        let flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS
        let rc = bytes.withUnsafeBufferPointer { buf in
            out.withUnsafeMutableBufferPointer { dst in
                tjDecompress2(handle, buf.baseAddress, UInt(buf.count), dst.baseAddress, sw, 0, sh, Int32(TJPF_GRAY.rawValue), flags)
            }
        }
        guard rc == 0 else { return .failure(.undecodable(.jpeg, message(handle))) }
        return .success(ImageInfo(format: .jpeg, width: UInt32(w), height: UInt32(h)))
    }

    private static func message(_ handle: tjhandle) -> String {
        guard let text = tjGetErrorStr2(handle) else { return "unknown error" }
        return String(cString: text)
    }

    private static func checkPNG(_ bytes: [UInt8]) -> Result<ImageInfo, ImageCheckError> {
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        let begun = bytes.withUnsafeBufferPointer { buf in png_image_begin_read_from_memory(&image, buf.baseAddress, buf.count) }
        guard begun != 0 else { return .failure(.undecodable(.png, pngMessage(&image))) }
        let w = image.width, h = image.height
        guard bounded(w, h) else {
            png_image_free(&image)
            return .failure(.tooLarge(width: w, height: h))
        }
        image.format = UInt32(PNG_FORMAT_GRAY)
        var out = [UInt8](repeating: 0, count: Int(w) * Int(h))
        let done = out.withUnsafeMutableBufferPointer { dst in png_image_finish_read(&image, nil, dst.baseAddress, 0, nil) }
        guard done != 0 else {
            let text = pngMessage(&image)
            png_image_free(&image)
            return .failure(.undecodable(.png, text))
        }
        return .success(ImageInfo(format: .png, width: w, height: h))
    }

    private static func pngMessage(_ image: inout png_image) -> String {
        withUnsafeBytes(of: &image.message) { raw in
            let chars = raw.prefix { $0 != 0 }
            return String(decoding: chars, as: UTF8.self)
        }
    }
}
