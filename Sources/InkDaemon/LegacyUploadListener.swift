// The legacy app's image upload listener (`--legacy-upload HOST:PORT[=ROOM]`, the app's fixed
// port 57777): an app in client mode uploads a JPEG there (LegacyUploadReceiver), and the
// daemon stores it as the background of its room's current page, through the relay like any
// member's upload (checked: SHA-256, a decodable JPEG or PNG, the size bounds and quota).
// Anything malformed, truncated, oversize or undecodable is refused: the connection closed,
// a log line, nothing stored.
import InkCodec
import InkProtocol
import InkRelay
import InkUV

final class LegacyUploadListener {
    /// The room every upload goes to; nil: the room the uploading app's board connection is in
    /// (one legacy listener's room for that address, else the upload is refused).
    let room: String?
    let listener: TCPListener
    let networks: [AddressPrefix]
    private let context: LegacyContext
    private let roomsOf: (SocketAddress) -> [String]
    private var uploads: [ObjectIdentifier: LegacyUpload] = [:]
    private var nextNumber: UInt64 = 1
    /// Uploads at once; a further connection is closed at accept.
    static let maxUploads = 16

    init(listener: TCPListener, room: String?, networks: [AddressPrefix], context: LegacyContext,
         roomsOf: @escaping (SocketAddress) -> [String]) throws(UVError) {
        self.listener = listener
        self.room = room
        self.networks = networks
        self.context = context
        self.roomsOf = roomsOf
        listener.onError = { [weak self] error in
            self?.context.metrics.errors(kind: "accept").increment()
            self?.context.logger.warning("legacy upload accept failed", ["error": error])
        }
        try listener.listen { [weak self] connection in self?.accept(connection) }
    }

    var localAddress: SocketAddress? { listener.localAddress }

    private func accept(_ connection: TCPConnection) {
        let remote = connection.remoteAddress
        guard networks.isEmpty || remote.map({ r in networks.contains { $0.contains(r) } }) == true else {
            connection.close()
            context.metrics.legacyRefused.labels(room ?? "upload").increment()
            context.logger.notice("legacy upload refused: its address is outside the listener's networks", ["address": remote?.description ?? "?"])
            return
        }
        guard uploads.count < LegacyUploadListener.maxUploads else {
            connection.close()
            context.logger.notice("legacy upload refused: too many at once", ["address": remote?.description ?? "?", "limit": LegacyUploadListener.maxUploads])
            return
        }
        let target: String
        if let room {
            target = room
        } else {
            let rooms = remote.map(roomsOf) ?? []
            guard rooms.count == 1 else {
                connection.close()
                context.logger.notice("legacy upload refused: no single room for its address (connect the app's board first, or give --legacy-upload HOST:PORT=ROOM)",
                                      ["address": remote?.description ?? "?", "rooms": rooms.joined(separator: ",")])
                return
            }
            target = rooms[0]
        }
        context.metrics.connectionsAccepted.labels("legacy_upload").increment()
        let number = nextNumber
        nextNumber += 1
        let upload = LegacyUpload(connection: connection, room: target, number: number, context: context) { [weak self] upload in
            self?.uploads[ObjectIdentifier(upload)] = nil
        }
        uploads[ObjectIdentifier(upload)] = upload
        upload.start()
    }

    func stopAccepting() { listener.close() }

    func closeUploads(reason: String) {
        for upload in Array(uploads.values) { upload.close(reason: reason) }
    }
}

/// One upload connection: frames in until the image is whole, then a short relay session
/// that stores it and sets the background, then closed.
final class LegacyUpload: RelaySessionTransport {
    /// An upload not complete by then is closed (the app sends it in one go).
    static let timeoutMicroseconds: UInt64 = 60_000_000
    /// Bytes of one relay `blobPut` part.
    static let partBytes = 32 * 1024

    private let connection: TCPConnection
    let room: String
    private let number: UInt64
    private let context: LegacyContext
    private let onClosed: (LegacyUpload) -> Void
    private var receiver: LegacyUploadReceiver
    private var timer: LoopTimer?
    private var deadline: UInt64 = 0
    private var nextHeartbeat: UInt64 = 0
    private var session: SessionID?
    private var image: [UInt8] = []
    private var hash: BlobHash?
    private var closed = false
    private var remote = "?"

    init(connection: TCPConnection, room: String, number: UInt64, context: LegacyContext, onClosed: @escaping (LegacyUpload) -> Void) {
        self.connection = connection
        self.room = room
        self.number = number
        self.context = context
        self.onClosed = onClosed
        receiver = LegacyUploadReceiver(maxImageBytes: context.driver.relay.configuration.limits.maxBlobBytes)
    }

    /// Producer ids of uploads: the legacy peers' base with the top bit of the low half set.
    private var origin: UInt64 { context.originBase | 0x8000_0000 | (number & 0x7FFF_FFFF) }

    var linkStatus: LinkStatus { LinkStatus(address: connection.remoteAddress, tcp: connection.info) }

    func start() {
        remote = connection.remoteAddress?.description ?? "?"
        let now = context.loop.now
        deadline = now + LegacyUpload.timeoutMicroseconds
        do {
            timer = try LoopTimer(loop: context.loop)
            try connection.startReading({ [weak self] bytes in self?.received(bytes) },
                                        onEnd: { [weak self] error in
                                            guard let self, self.session == nil else { return }
                                            self.refuse(error.map { "read failed: \($0)" } ?? "the app closed before the upload completed (\(self.receiver.receivedCount) bytes)")
                                        })
        } catch {
            close(reason: "setup failed: \(error)")
            return
        }
        connection.onError = { [weak self] error in self?.close(reason: "write failed: \(error)") }
        // The app's socket service drops a link that sends no heartbeat for 9 s.
        heartbeat()
        armTimer()
    }

    private func heartbeat() {
        _ = try? connection.write(LegacyFrame.heartbeat.bytes)
        nextHeartbeat = context.loop.now + UInt64(context.sessionConfiguration.heartbeatInterval.microseconds)
    }

    private func armTimer() {
        guard !closed, let timer else { return }
        let now = context.loop.now
        let next = min(deadline, nextHeartbeat)
        timer.start(afterMicroseconds: next > now ? next - now : 0) { [weak self] in self?.tick() }
    }

    private func tick() {
        guard !closed else { return }
        let now = context.loop.now
        if now >= deadline {
            refuse("not complete within \(LegacyUpload.timeoutMicroseconds / 1_000_000) s (\(receiver.receivedCount) bytes)")
            return
        }
        if now >= nextHeartbeat { heartbeat() }
        armTimer()
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, session == nil else { return }
        context.metrics.bytesReceived.labels("legacy").increment(by: UInt64(bytes.count))
        do {
            try receiver.handleBytes(bytes)
        } catch {
            refuse("\(error)")
            return
        }
        guard let whole = receiver.image else { return }
        image = whole
        store()
    }

    /// The image is whole: join the room for a moment, upload it, name it as the background.
    private func store() {
        let hash = DaemonBlobs.hash(image)
        self.hash = hash
        let driver = context.driver
        // No address: a moment's session (upload, name, close) that no per-address quota counts.
        let session = driver.open(self, kind: .legacy)
        self.session = session
        guard !closed else { return }
        let head = driver.relay.roomHead(room)
        let user = "legacy-upload-\(number)@" + String(remote.map { $0 == ":" ? "_" : $0 })
        driver.authorizer.trust(origin)
        // Joined at the room's head: the upload needs no copy of the board.
        driver.handle(.join(JoinRequest(room: room, user: user, role: .presenter, origin: origin,
                                        have: head.map { .upTo(roomSeq: $0, digest: 0) } ?? .nothing)), from: session)
        driver.authorizer.forget(origin)
        guard !closed else { return }
        var offset = 0
        while offset < image.count, !closed {
            let end = min(image.count, offset + LegacyUpload.partBytes)
            driver.handle(.blobPut(hash: hash, size: UInt32(image.count), offset: UInt32(offset), data: Array(image[offset..<end])), from: session)
            offset = end
        }
    }

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !closed, let session else { return }
        switch message {
        case .blobStored(let stored, let width, let height):
            guard stored == hash, let image = BackgroundImage(hash: stored, width: width, height: height) else { return }
            let board = context.driver.relay.board(room)
            let page = board?.presentedPage ?? .first
            var state = BinaryCodecState()
            guard let payload = try? BinaryBatchCodec.encode(
                Batch(author: AuthorID(0), commands: [TimedCommand(timeMs: 0, command: .background(PageBackground(page: page, image: image)))]),
                state: &state) else { return }
            context.driver.handle(.batch(originSeq: 1, payload: payload), from: session)
        case .batchAck:
            context.logger.info("legacy upload stored as the background", [
                "room": room, "remote": remote, "image": hash?.hex ?? "?", "bytes": self.image.count,
            ])
            close(reason: "upload stored")
        case .error(let code, _, let text):
            refuse("\(code): \(text)")
        case .joinRefused(let reason, let text):
            refuse("join refused (\(reason)): \(text)")
        case .goingAway(_, let text):
            close(reason: "the relay ended the upload: \(text)")
        default:
            break
        }
    }

    func relayClosed(_ reason: GoingAwayReason) { close(reason: "relay closed the session (\(reason))") }

    private func refuse(_ reason: String) {
        guard !closed else { return }
        context.metrics.errors(kind: "legacy_upload_refused").increment()
        context.logger.notice("legacy upload refused", ["room": room, "remote": remote, "reason": reason])
        close(reason: reason)
    }

    func close(reason: String) {
        guard !closed else { return }
        closed = true
        timer?.close()
        connection.close()
        if let session { context.driver.transportClosed(session) }
        context.logger.debug("legacy upload closed", ["room": room, "remote": remote, "reason": reason])
        onClosed(self)
    }
}
