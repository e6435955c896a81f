// Made images: what tests, the benchmark and `inkwire background` need to write (a page
// rendered to pixels, a test photo). Encoded by the same libraries that check them.
import CPNG
import CTurboJPEG

public enum ImageEncode {
    /// A JPEG of 8-bit RGB pixels (`rgb.count == width * height * 3`), or nil when it fails.
    public static func jpeg(rgb: [UInt8], width: Int, height: Int, quality: Int32 = 85) -> [UInt8]? {
        guard width > 0, height > 0, rgb.count == width * height * 3, let handle = tjInitCompress() else { return nil }
        defer { tjDestroy(handle) }
        var out: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let rc = rgb.withUnsafeBufferPointer { src in
            tjCompress2(handle, src.baseAddress, Int32(width), 0, Int32(height), Int32(TJPF_RGB.rawValue), &out, &size,
                        Int32(TJSAMP_420.rawValue), quality, 0)
        }
        defer { if let out { tjFree(out) } }
        guard rc == 0, let out else { return nil }
        return Array(UnsafeBufferPointer(start: out, count: Int(size)))
    }

    /// A PNG of 8-bit RGB pixels, or nil when it fails.
    public static func png(rgb: [UInt8], width: Int, height: Int) -> [UInt8]? {
        guard width > 0, height > 0, rgb.count == width * height * 3 else { return nil }
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        image.width = UInt32(width)
        image.height = UInt32(height)
        image.format = UInt32(PNG_FORMAT_RGB)
        var size = 0
        let sized = rgb.withUnsafeBufferPointer { src in png_image_write_to_memory(&image, nil, &size, 0, src.baseAddress, 0, nil) }
        guard sized != 0, size > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: size)
        let written = out.withUnsafeMutableBufferPointer { dst in
            rgb.withUnsafeBufferPointer { src in png_image_write_to_memory(&image, dst.baseAddress, &size, 0, src.baseAddress, 0, nil) }
        }
        guard written != 0 else { return nil }
        return Array(out.prefix(size))
    }

    /// Deterministic test pixels: smooth gradients with `noise` (0...255) of seeded noise on
    /// top, so a JPEG of them is about as large as a photo of the same size at `noise` ~ 40.
    public static func testPattern(width: Int, height: Int, seed: UInt64, noise: Int = 40) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        var i = 0
        for y in 0..<height {
            for x in 0..<width {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                let n = noise > 0 ? Int(state % UInt64(noise + 1)) - noise / 2 : 0
                rgb[i] = UInt8(clamping: x * 255 / max(1, width - 1) + n)
                rgb[i + 1] = UInt8(clamping: y * 255 / max(1, height - 1) + n)
                rgb[i + 2] = UInt8(clamping: ((x / 64 + y / 64) % 2) * 160 + 40 + n)
                i += 3
            }
        }
        return rgb
    }
}
