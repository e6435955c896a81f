import Testing
@testable import InkCodec

private func bytes(_ frames: [LegacyFrame]) -> [UInt8] {
    var out: [UInt8] = []
    for f in frames { f.append(to: &out) }
    return out
}

private let image = (0..<3072).map { UInt8(truncatingIfNeeded: $0 &* 7) }

/// The app's upload, as its client mode sends it, arrives whole in reads of any size, with
/// heartbeats between frames; the empty chunk after a multiple of 1024 is taken.
@Test func anUploadArrivesWholeInReadsOfAnySize() throws {
    var frames = LegacyUploadSender.frames(for: image)
    #expect(frames.count == 1 + 3 + 1 + 1)
    #expect(frames.first == .data(command: 101, payload: Array("101,4096,4096,3072".utf8)))
    #expect(frames.last == .data(command: 101, payload: Array("102".utf8)))
    frames.insert(.heartbeat, at: 2)
    let wire = bytes(frames)
    for readSize in [1, 2, 5, 1029, 1030, 1031, wire.count] {
        var receiver = LegacyUploadReceiver(maxImageBytes: 4096)
        var i = 0
        while i < wire.count {
            try receiver.handleBytes(wire[i..<min(wire.count, i + readSize)])
            i += readSize
        }
        #expect(receiver.image == image, "reads of \(readSize)")
    }
}

/// Hostile uploads: each refused with its reason, nothing kept.
@Test func hostileUploadsAreRefused() {
    func refusal(_ wire: [UInt8], max: Int = 4096) -> LegacyUploadError? {
        var receiver = LegacyUploadReceiver(maxImageBytes: max)
        do {
            try receiver.handleBytes(wire)
            return receiver.image == nil ? nil : nil
        } catch {
            // Only frames after a completed upload leave an image (the daemon reads no more then).
            #expect((receiver.image == nil) == (error != .afterCompletion))
            return error
        }
    }
    let good = LegacyUploadSender.frames(for: image)
    // Truncated: 102 after two of three chunks.
    #expect(refusal(bytes(good.enumerated().filter { $0.offset != 3 }.map(\.element))) == .truncated(received: 2048, announced: 3072))
    // Wrong length: more bytes than announced.
    #expect(refusal(bytes([good[0], good[1], good[2], good[3], good[3]])) == .tooLong(received: 4096, announced: 3072))
    // Over the limit.
    #expect(refusal(bytes(good), max: 3000) == .lengthOutOfBounds(length: 3072, limit: 3000))
    #expect(refusal(bytes([.data(command: 101, payload: Array("101,1,1,0".utf8))])) == .lengthOutOfBounds(length: 0, limit: 4096))
    // Malformed info, data before the info, unknown commands, frames after completion.
    for info in ["101", "101,1,1", "101,a,1,5", "101,1,1,5,6", "101,1,1,99999999999"] {
        #expect(refusal(bytes([.data(command: 101, payload: Array(info.utf8))])) == .malformedInfo, "\(info)")
    }
    #expect(refusal(bytes([good[1]])) == .unexpectedFrame(command: 11))
    #expect(refusal(bytes([good[0], .data(command: 7, payload: [1])])) == .unexpectedFrame(command: 7))
    #expect(refusal(bytes([good[0], good[0]])) == .unexpectedFrame(command: 101))
    #expect(refusal(bytes(good + [good[1]])) == .afterCompletion)
    // A frame past the frame bound.
    #expect(refusal([0, 11, 0, 2, 0, 0]) == .frame(.frameTooLarge(command: 11, length: 131_072)))
}
