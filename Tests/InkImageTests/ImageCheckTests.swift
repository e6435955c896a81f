import Testing
@testable import InkImage

/// Made JPEGs and PNGs check out with their size; the hostile ones are refused with the reason.
@Test func madeImagesCheckOutWithTheirSize() throws {
    let rgb = ImageEncode.testPattern(width: 320, height: 200, seed: 1)
    let jpeg = try #require(ImageEncode.jpeg(rgb: rgb, width: 320, height: 200))
    #expect(ImageCheck.check(jpeg) == .success(ImageInfo(format: .jpeg, width: 320, height: 200)))
    let png = try #require(ImageEncode.png(rgb: rgb, width: 320, height: 200))
    #expect(ImageCheck.check(png) == .success(ImageInfo(format: .png, width: 320, height: 200)))
}

@Test func hostileImagesAreRefused() throws {
    let rgb = ImageEncode.testPattern(width: 320, height: 200, seed: 2)
    let jpeg = try #require(ImageEncode.jpeg(rgb: rgb, width: 320, height: 200))
    let png = try #require(ImageEncode.png(rgb: rgb, width: 320, height: 200))
    #expect(ImageCheck.check([]) == .failure(.notAnImage))
    #expect(ImageCheck.check(Array("%PDF-1.7 not an image".utf8)) == .failure(.notAnImage))
    // Truncated: the JPEG's entropy data ends early (a warning, refused), the PNG's IDAT too.
    for cut in [jpeg.count / 2, jpeg.count - 2] {
        guard case .failure(.undecodable(.jpeg, _)) = ImageCheck.check(Array(jpeg.prefix(cut))) else {
            Issue.record("a JPEG cut at \(cut) of \(jpeg.count) was not refused")
            continue
        }
    }
    for cut in [png.count / 2, png.count - 13] {
        guard case .failure(.undecodable(.png, _)) = ImageCheck.check(Array(png.prefix(cut))) else {
            Issue.record("a PNG cut at \(cut) of \(png.count) was not refused")
            continue
        }
    }
    // Garbage after a valid signature.
    var garbage = Array(jpeg.prefix(3))
    garbage += [UInt8](repeating: 0x41, count: 4000)
    guard case .failure(.undecodable) = ImageCheck.check(garbage) else { Issue.record("garbage JPEG checked out"); return }
    // A PNG whose header claims 20000 x 20000 pixels is refused from the header, not decoded.
    var huge = png
    // IHDR's width and height follow the signature (8), the chunk length (4) and type (4).
    huge.replaceSubrange(16..<24, with: [0, 0, 0x4E, 0x20, 0, 0, 0x4E, 0x20])
    let crc = crc32(Array(huge[12..<29]))
    huge.replaceSubrange(29..<33, with: [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
    #expect(ImageCheck.check(huge) == .failure(.tooLarge(width: 20000, height: 20000)))
}

/// The PNG chunk CRC (ISO 3309), for the forged header above.
private func crc32(_ bytes: [UInt8]) -> UInt32 {
    var c: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        c ^= UInt32(b)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }
    return ~c
}
