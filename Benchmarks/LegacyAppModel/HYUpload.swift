// HYWhiteboard v1.2's images, written here from its source: in server mode the upload listener
// on port 57777 (`HYServerManager startServerForListeningUpload:YES`, one client at a time), in
// client mode the upload a user starts (`_insertImage:`, `_uploadImage`); each upload
// connection's socket service (the same receive routine, heartbeats and liveness check as the
// board connection), `HYUploadManager` (one shared instance: its buffer, image size and length
// outlive connections) and the screen's `onNewImage:`. Test fixture.
import InkCodec
import InkProtocol

/// `_imageView.image`: the image a whiteboard screen shows under its lines, with the pixel size
/// the app decoded (it shows the whole image aspect-fitted into its view, `ScaleAspectFit`,
/// whatever a room's background says about fitting).
public struct HYImage: Hashable, Sendable {
    public var bytes: [UInt8]
    public var width: Int
    public var height: Int

    public init(bytes: [UInt8], width: Int, height: Int) {
        self.bytes = bytes
        self.width = width
        self.height = height
    }
}

/// `HYUploadManager` (the app's singleton) on the receiving side.
///
/// On a text frame (command 101) it splits the payload at commas: `101` takes `[1]` and `[2]`
/// as the size (fewer than three fields: `NSRangeException`, the app crashes) and the last
/// field's `integerValue` as the length, and empties its buffer; `102` compares the buffer's
/// length with that length: unequal, it logs and returns (the connection stays open, the
/// buffer stays as it is); equal, it decodes the buffer (ImageIO: an undecodable buffer gives a
/// nil image, which clears the screen's background), hands the image to the whiteboard screen
/// if one is up (its delegate, set in `viewDidLoad`, cleared in `viewWillDisappear`) and
/// disconnects the upload connection. Other codes are ignored. Every frame of another command
/// is appended to the buffer, with no bound and whether or not a `101` came first (the buffer
/// is emptied only by a `101`).
public final class HYUploadManager {
    /// `CGImageSourceCreateWithData` + `CGImageSourceCreateImageAtIndex`: the size of a decodable
    /// image, nil otherwise.
    public typealias Decoder = @Sendable ([UInt8]) -> (width: Int, height: Int)?

    /// `_receivedData` (nil until first used).
    public private(set) var receivedData: [UInt8]?
    /// `_imageSize`, `_imageLength`.
    public private(set) var imageSize = (width: 0.0, height: 0.0)
    public private(set) var imageLength = 0
    /// The whiteboard screen that shows images (`delegate`), or nil.
    public weak var screen: HYWhiteboardApp?
    let decode: Decoder

    // Counters for tests.
    public private(set) var imagesDecoded = 0
    public private(set) var imagesDropped = 0
    public private(set) var lengthMismatches = 0

    /// `decode` stands in for ImageIO; the model itself stays pure (InkBenchSupport's
    /// `HYUploadManager.imageIO` decodes JPEG and PNG with InkImage).
    public init(decode: @escaping Decoder) { self.decode = decode }

    /// `onSocketServiceDidReceiveData:command:service:`. Returns true when it disconnected the
    /// connection (after a complete image).
    func receive(command: UInt16, payload: [UInt8]) throws(HYCrash) -> Bool {
        guard command == LegacyFrame.textCommand else {
            if receivedData == nil { receivedData = [] }
            receivedData! += payload
            return false
        }
        guard let fields = HYText.fields(payload), let first = fields.first else { return false }
        switch HYText.integerValue(first) {
        case LegacyUploadReceiver.infoCode:
            guard fields.count >= 3 else { throw HYCrash(reason: "image info with \(fields.count) fields") }
            imageSize = (Double(HYText.floatValue(fields[1])), Double(HYText.floatValue(fields[2])))
            imageLength = HYText.integerValue(fields.last!)
            if receivedData != nil { receivedData = [] }
            return false
        case LegacyUploadReceiver.completionCode:
            let data = receivedData ?? []
            receivedData = data
            guard data.count == imageLength else {
                lengthMismatches += 1  // "接受图片失败，数据不全"
                return false
            }
            let size = decode(data)
            if size != nil { imagesDecoded += 1 }
            if let screen {
                screen.showImage(size.map { HYImage(bytes: data, width: $0.width, height: $0.height) })
            } else {
                imagesDropped += 1
            }
            return true
        default:
            return false
        }
    }
}

/// One accepted connection on the app's upload port: its `HYSocketService` (the receive routine
/// of `HYReceiver`, a heartbeat at the accept and every 3 s, the liveness check) delivering to
/// the shared `HYUploadManager`.
///
/// Drive it as the board connection: `handleRead` for each read (at most 1030 bytes),
/// `handleTimeout` at `pollTimeout`, send every `pollWrite`; `isOpen` false means the app
/// closed it (after an image, its liveness check, or a crash).
public final class HYUploadConnection {
    public let manager: HYUploadManager
    let configuration: HYWhiteboardApp.Configuration
    private var receiver = HYReceiver()
    private var writes: [[UInt8]] = []
    private var heartbeatStamp = 0.0
    private var nextHeartbeat: Instant?
    private var nextCheck: Instant?
    public private(set) var closedReason: String?
    public private(set) var crash: HYCrash?
    public private(set) var bytesRead = 0

    public init(manager: HYUploadManager, configuration: HYWhiteboardApp.Configuration, now: Instant) {
        self.manager = manager
        self.configuration = configuration
        // `onSocketDidAcceptNewClient`: `_startRunLoopForHeartbeat`.
        heartbeatStamp = seconds(now)
        writes.append(LegacyFrame.heartbeat.bytes)
        nextHeartbeat = now + configuration.heartbeatInterval
        nextCheck = now + configuration.livenessInterval
    }

    public var isOpen: Bool { closedReason == nil }

    public func handleRead(_ bytes: [UInt8], now: Instant) {
        guard isOpen else { return }
        precondition(bytes.count <= HYReceiver.readBytes, "the app reads at most \(HYReceiver.readBytes) bytes")
        bytesRead += bytes.count
        for delivery in receiver.handleRead(bytes) {
            // After `disconnectService` the service's buffer is nil: the rest of the read is lost.
            guard isOpen else { return }
            switch delivery {
            case .heartbeat:
                heartbeatStamp = seconds(now)
            case .data(let command, let payload):
                do {
                    if try manager.receive(command: command, payload: payload) { close("image taken") }
                } catch {
                    crash = error
                    close("crashed: \(error)")
                }
            }
        }
    }

    /// `_uploadImage` of a client-mode app, on its own connection to the host's port 57777:
    /// `sendImageInfoSize:` (`101,4096,4096,length`: the size is hard-coded), the image through
    /// `_writeDataBySubpackage` (one write per frame: command 11 and 1024 bytes, an empty frame
    /// more when the length is a multiple of 1024), then, in that write's completion, the screen
    /// shows the image itself (`onNewImage:` with its own file) and `102` goes out. The app
    /// always uploads its bundled JPEG; tests give the bytes that stand for it.
    public func sendImage(_ image: [UInt8]) {
        guard isOpen else { return }
        for frame in LegacyUploadSender.frames(for: image) {
            if case .data(_, let payload) = frame, payload == Array("\(LegacyUploadReceiver.completionCode)".utf8) {
                manager.screen?.showImage(manager.decode(image).map { HYImage(bytes: image, width: $0.width, height: $0.height) })
            }
            writes.append(frame.bytes)
        }
    }

    /// The peer closed (`NSStreamEventEndEncountered`).
    public func handlePeerClosed() { close("peer closed the connection") }

    /// `disconnectUpload` (the whiteboard screen went) or the app quitting.
    public func close(_ reason: String) {
        guard isOpen else { return }
        closedReason = reason
        writes = []
    }

    public func pollWrite() -> [UInt8]? {
        guard isOpen, !writes.isEmpty else { return nil }
        return writes.removeFirst()
    }

    public func pollTimeout() -> Instant? {
        guard isOpen, let h = nextHeartbeat, let c = nextCheck else { return nil }
        return min(h, c)
    }

    public func handleTimeout(now: Instant) {
        guard isOpen else { return }
        if let at = nextHeartbeat, now >= at {
            writes.append(LegacyFrame.heartbeat.bytes)
            nextHeartbeat = at + configuration.heartbeatInterval
        }
        if let at = nextCheck, now >= at {
            let limit = Double(configuration.livenessInterval.microseconds) / 1_000_000
            if seconds(now) - heartbeatStamp > limit {
                close("no heartbeat recognised for more than \(Int(limit)) s")
                return
            }
            nextCheck = at + configuration.livenessInterval
        }
    }

    private func seconds(_ t: Instant) -> Double { Double(t.microseconds) / 1_000_000 }
}
