import Glibc

/// An exclusive `flock` on `DATA_DIR/inkwired.lock`, held by a running daemon for its life and by
/// `inkwired restore`: a restore never replaces the room log under a running daemon, and two
/// daemons never share one data directory.
final class DataDirectoryLock {
    static let fileName = "inkwired.lock"
    private let fd: Int32

    /// nil with the reason when another process holds the lock or the file cannot be opened.
    static func acquire(dataDir: String) -> Result<DataDirectoryLock, ConfigError> {
        let path = dataDir + "/" + fileName
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return .failure(.startFailed("\(path): \(FileSystem.errnoText())")) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            close(fd)
            return .failure(.startFailed(busy ? "another inkwired uses \(dataDir) (\(path) is locked)" : "\(path): \(FileSystem.errnoText())"))
        }
        return .success(DataDirectoryLock(fd: fd))
    }

    private init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }
}
