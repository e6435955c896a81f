// The legacy app's image upload (its port 57777; docs/legacy-app.md, Image
// upload): `101,<width>,<height>,<byteLength>` as a text frame, the image in file-chunk frames
// (command 11, 1024 bytes each, one empty frame more when the length is a multiple of 1024),
// then the text frame `102`. The receiving app checks that the bytes it got equal the length
// and closes. Its width and height are hard-coded (4096, 4096), so they say nothing.

/// Why an upload is refused. Every error is final: the connection is closed, nothing stored.
public enum LegacyUploadError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A frame that does not belong where it came (data before the info, a second info, an
    /// unknown command, a text other than `101,...` or `102`).
    case unexpectedFrame(command: UInt16)
    /// The info frame is not `101,w,h,length` with decimal integers.
    case malformedInfo
    /// The announced length is 0 or past the daemon's bound.
    case lengthOutOfBounds(length: UInt64, limit: Int)
    /// More image bytes than announced.
    case tooLong(received: Int, announced: Int)
    /// `102` came before all the announced bytes.
    case truncated(received: Int, announced: Int)
    /// Frames after `102`.
    case afterCompletion
    case frame(LegacyFrameError)

    public var description: String {
        switch self {
        case .unexpectedFrame(let command): "unexpected frame (command \(command))"
        case .malformedInfo: "the upload's first frame is not 101,width,height,length"
        case let .lengthOutOfBounds(length, limit): "announced length \(length) is not 1...\(limit) bytes"
        case let .tooLong(received, announced): "\(received) image bytes, more than the announced \(announced)"
        case let .truncated(received, announced): "completed after \(received) of the announced \(announced) image bytes"
        case .afterCompletion: "frames after the upload completed"
        case .frame(let error): "bad frame: \(error)"
        }
    }
}

/// The receiving side of one upload connection: bytes in (`handleBytes`), the whole image out
/// (`image`, once complete). Sans IO; the connection is closed on the first error.
public struct LegacyUploadReceiver: Sendable {
    /// The app's info code and completion code (HYUploadCmd).
    public static let infoCode = 101
    public static let completionCode = 102
    /// Bytes of one file-chunk frame the app sends (its socket buffer minus the header).
    public static let chunkBytes = 1024

    public let maxImageBytes: Int
    private var decoder = LegacyFrameDecoder()
    private var announced: Int?
    private var received: [UInt8] = []
    /// The whole image, once `102` came with exactly the announced bytes.
    public private(set) var image: [UInt8]?

    public init(maxImageBytes: Int) { self.maxImageBytes = maxImageBytes }

    /// Image bytes received so far.
    public var receivedCount: Int { received.count }

    public mutating func handleBytes(_ bytes: some Collection<UInt8>) throws(LegacyUploadError) {
        do { try decoder.handleBytes(bytes) } catch { throw .frame(error) }
        while true {
            let frame: LegacyFrame?
            do { frame = try decoder.pollFrame() } catch { throw .frame(error) }
            guard let frame else { return }
            try handle(frame)
        }
    }

    private mutating func handle(_ frame: LegacyFrame) throws(LegacyUploadError) {
        guard image == nil else {
            if case .heartbeat = frame { return }
            throw .afterCompletion
        }
        switch frame {
        case .heartbeat:
            return
        case .data(let command, let payload) where command == LegacyFrame.fileChunkCommand:
            guard let announced else { throw .unexpectedFrame(command: command) }
            guard received.count + payload.count <= announced else {
                throw .tooLong(received: received.count + payload.count, announced: announced)
            }
            received += payload
        case .data(let command, let payload) where command == LegacyFrame.textCommand:
            let fields = payload.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
            guard let code = fields.first.flatMap(LegacyUploadReceiver.decimal) else { throw .malformedInfo }
            switch (code, announced) {
            case (UInt64(LegacyUploadReceiver.infoCode), nil):
                guard fields.count == 4, fields.dropFirst().allSatisfy({ LegacyUploadReceiver.decimal($0) != nil }),
                      let length = LegacyUploadReceiver.decimal(fields[3]) else { throw .malformedInfo }
                guard length >= 1, length <= UInt64(maxImageBytes) else { throw .lengthOutOfBounds(length: length, limit: maxImageBytes) }
                announced = Int(length)
                received.reserveCapacity(Int(length))
            case (UInt64(LegacyUploadReceiver.completionCode), let announced?):
                guard fields.count == 1 else { throw .unexpectedFrame(command: command) }
                guard received.count == announced else { throw .truncated(received: received.count, announced: announced) }
                image = received
                received = []
            default:
                throw .unexpectedFrame(command: command)
            }
        case .data(let command, _):
            throw .unexpectedFrame(command: command)
        }
    }

    /// 1 to 10 decimal digits.
    private static func decimal(_ field: ArraySlice<UInt8>) -> UInt64? {
        guard !field.isEmpty, field.count <= 10 else { return nil }
        var v: UInt64 = 0
        for c in field {
            guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
            v = v * 10 + UInt64(c - UInt8(ascii: "0"))
        }
        return v
    }
}

public enum LegacyUploadSender {
    /// The frames an app in client mode sends to upload `image`, in order (and what the daemon
    /// sends an app in server mode to show a background): the info (with the app's hard-coded
    /// 4096 x 4096 unless given), 1024-byte chunks plus the empty one the app adds when the
    /// length is a multiple of 1024, and `102`.
    public static func frames(for image: [UInt8], width: Int = 4096, height: Int = 4096) -> [LegacyFrame] {
        var out: [LegacyFrame] = [.data(command: LegacyFrame.textCommand, payload: Array("\(LegacyUploadReceiver.infoCode),\(width),\(height),\(image.count)".utf8))]
        var offset = 0
        while offset < image.count {
            let end = min(image.count, offset + LegacyUploadReceiver.chunkBytes)
            out.append(.data(command: LegacyFrame.fileChunkCommand, payload: Array(image[offset..<end])))
            offset = end
        }
        if image.count % LegacyUploadReceiver.chunkBytes == 0 { out.append(.data(command: LegacyFrame.fileChunkCommand, payload: [])) }
        out.append(.data(command: LegacyFrame.textCommand, payload: Array("\(LegacyUploadReceiver.completionCode)".utf8)))
        return out
    }
}
