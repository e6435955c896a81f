// The relay's `RoomBlobs`: background images in the room log's store, named by SHA-256 and
// checked by decoding them (InkImage) before they are stored.
import InkCodec
import InkCrypto
import InkImage
import InkProtocol
import InkRelay
import InkStore

final class DaemonBlobs: RoomBlobs {
    private struct Key: Hashable {
        var room: String
        var hash: BlobHash
    }

    private let store: RoomLogStore
    private let logger: Logger
    /// Sizes of images already checked, so a background command is checked without decoding.
    private var sizes: [Key: ImageSize] = [:]
    /// Bounds `sizes` (entries are a few dozen bytes).
    static let maxCachedSizes = 65_536

    init(store: RoomLogStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Content addresses are SHA-256 whatever the sessions' crypto (the benchmark's unsealed
    /// mode too): a device checks what it fetched against the same function.
    static func hash(_ bytes: [UInt8]) -> BlobHash { BlobHash(OpenSSLCrypto.shared.sha256(bytes))! }

    func imageSize(room: String, hash: BlobHash) -> ImageSize? {
        let key = Key(room: room, hash: hash)
        if let known = sizes[key] { return known }
        guard store.hasBlob(room: room, hash: hash.bytes), let bytes = readBlob(room: room, hash: hash) else { return nil }
        guard case .success(let info) = ImageCheck.check(bytes) else {
            logger.warning("a stored background image no longer decodes", ["room": room, "image": hash.hex])
            return nil
        }
        let size = ImageSize(width: info.width, height: info.height)
        remember(key, size)
        return size
    }

    func readBlob(room: String, hash: BlobHash) -> [UInt8]? {
        do {
            return try store.readBlob(room: room, hash: hash.bytes)
        } catch {
            logger.error("cannot read a background image", ["room": room, "image": hash.hex, "error": error])
            return nil
        }
    }

    func storeImage(room: String, hash: BlobHash, bytes: [UInt8], now: Instant) -> Result<ImageSize, BlobRefusal> {
        guard DaemonBlobs.hash(bytes) == hash else {
            return .failure(BlobRefusal("the image's bytes do not match its SHA-256 \(hash.hex)"))
        }
        let info: ImageInfo
        switch ImageCheck.check(bytes) {
        case .success(let checked): info = checked
        case .failure(let error): return .failure(BlobRefusal("\(error)"))
        }
        do {
            _ = try store.putBlob(room: room, StoredBlob(hash: hash.bytes, bytes: bytes, createdAtMs: WallClock.milliseconds()))
        } catch {
            switch error {
            case .blobTooLarge, .roomBlobQuotaFull, .tooManyRooms, .invalidRoomName:
                return .failure(BlobRefusal("\(error)"))
            default:
                return .failure(BlobRefusal(.storageUnavailable, "cannot store the image now: \(error)"))
            }
        }
        let size = ImageSize(width: info.width, height: info.height)
        remember(Key(room: room, hash: hash), size)
        return .success(size)
    }

    private func remember(_ key: Key, _ size: ImageSize) {
        if sizes.count >= DaemonBlobs.maxCachedSizes { sizes.removeAll(keepingCapacity: true) }
        sizes[key] = size
    }
}
