import Foundation
import Glibc

/// A named network namespace (`ip netns add NAME`, a bind mount under `/var/run/netns`) that
/// this process created, and the ways into it: `run` executes a closure on a thread that joined
/// the namespace (a socket or TUN device opened there belongs to the namespace for good, whoever
/// uses it afterwards), and `PacketLink` runs commands in it with `ip netns exec`.
///
/// Names are `PREFIX-PID-SERIAL-SIDE`, so `removeStale(prefix:)` can tell which ones a dead
/// process left behind; a namespace whose creator is alive, or whose name does not have that
/// shape, is never touched.
struct NetworkNamespace: Sendable {
    /// Where `ip netns` keeps its bind mounts.
    static let directory = "/var/run/netns"
    /// Longest accepted name prefix (a namespace name is a file name).
    static let maximumPrefixLength = 32

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let name: String
    var path: String { "\(NetworkNamespace.directory)/\(name)" }

    /// Creates the namespace `name` (it must not exist) and registers it for removal at exit.
    static func create(_ name: String) throws(Failure) -> NetworkNamespace {
        try IPCommand.run(["netns", "add", name])
        LiveNamespaces.shared.add(name)
        return NetworkNamespace(name: name)
    }

    /// Removes the namespace's mount and name (what `ip netns del` does, without a child
    /// process, so it also works at exit). The namespace itself dies once no process, socket
    /// or device still holds it. Harmless when already gone.
    func remove() {
        NetworkNamespace.removeMount(path)
        LiveNamespaces.shared.remove(name)
    }

    fileprivate static func removeMount(_ path: String) {
        _ = umount2(path, Int32(MNT_DETACH))
        _ = unlink(path)
    }

    /// Whether `/var/run/netns/NAME` exists.
    static func exists(_ name: String) -> Bool { access("\(directory)/\(name)", F_OK) == 0 }

    /// A name for side `side` of link number `serial` of this process.
    static func name(prefix: String, serial: Int, side: String) -> String { "\(prefix)-\(getpid())-\(serial)-\(side)" }

    /// Checks a user-supplied prefix: letters, digits and `_` only, so names stay unambiguous.
    static func validate(prefix: String) throws(Failure) {
        let allowed = prefix.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 95 }
        guard !prefix.isEmpty, prefix.utf8.count <= maximumPrefixLength, allowed else {
            throw Failure(description: "namespace prefix must be 1-\(maximumPrefixLength) letters, digits or '_', got '\(prefix)'")
        }
    }

    /// Removes namespaces named `PREFIX-PID-SERIAL-SIDE` whose PID no longer runs; returns
    /// their names (sorted).
    @discardableResult
    static func removeStale(prefix: String) -> [String] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var removed: [String] = []
        for entry in entries.sorted() where entry.hasPrefix(prefix + "-") {
            let parts = entry.dropFirst(prefix.count + 1).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, let pid = Int32(parts[0]), pid > 0, Int(parts[1]) != nil, parts[2] == "a" || parts[2] == "b" else {
                continue
            }
            guard kill(pid, 0) != 0, errno == ESRCH else { continue }
            removeMount("\(directory)/\(entry)")
            removed.append(entry)
        }
        return removed
    }

    /// Runs `body` on a new thread that first joins this namespace, waits for it and returns its
    /// result. Sockets and TUN devices opened by `body` live in the namespace.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let path = self.path
        let outcome = OwnThread.run { () -> Result<T, any Error> in
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return .failure(Failure(description: "open \(path): \(String(cString: strerror(errno)))")) }
            defer { close(fd) }
            guard let setns = SystemCalls.setns, setns(fd, SystemCalls.cloneNewNet) == 0 else {
                return .failure(Failure(description: "setns \(path): \(String(cString: strerror(errno)))"))
            }
            return Result { try body() }
        }
        guard let outcome else { throw Failure(description: "no thread to join \(path)") }
        return try outcome.get()
    }
}

/// Namespaces this process created and has not removed yet; whatever is left at `exit` is
/// removed then (a crash or a fatal signal leaves them to the next run's `removeStale`).
final class LiveNamespaces: @unchecked Sendable {
    static let shared = LiveNamespaces()
    private var lock = pthread_mutex_t()
    private var names: [String] = []
    private var exitHookInstalled = false

    private init() { pthread_mutex_init(&lock, nil) }

    func add(_ name: String) {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        names.append(name)
        if !exitHookInstalled {
            exitHookInstalled = true
            atexit { LiveNamespaces.shared.removeAll() }
        }
    }

    func remove(_ name: String) {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        names.removeAll { $0 == name }
    }

    func removeAll() {
        pthread_mutex_lock(&lock)
        let left = names
        names = []
        pthread_mutex_unlock(&lock)
        for name in left { NetworkNamespace.removeMount("\(NetworkNamespace.directory)/\(name)") }
    }
}

/// Linux calls the Swift Glibc module does not import (they need `_GNU_SOURCE`), bound once
/// through the C library's own symbol table.
enum SystemCalls {
    typealias SetNS = @convention(c) (Int32, Int32) -> Int32
    typealias PPoll = @convention(c) (UnsafeMutablePointer<pollfd>?, nfds_t, UnsafePointer<timespec>?, UnsafePointer<sigset_t>?) -> Int32

    /// `CLONE_NEWNET` from <sched.h>.
    static let cloneNewNet: Int32 = 0x4000_0000

    static let setns: SetNS? = symbol("setns", as: SetNS.self)
    static let ppoll: PPoll? = symbol("ppoll", as: PPoll.self)

    private static func symbol<F>(_ name: String, as type: F.Type) -> F? {
        guard let handle = dlopen(nil, RTLD_NOW), let address = dlsym(handle, name) else { return nil }
        return unsafeBitCast(address, to: type)
    }
}

/// Runs a closure on a fresh POSIX thread and waits for it (a thread of its own, so joining a
/// namespace never changes the caller's thread).
enum OwnThread {
    /// The C thread entry cannot capture generic types, so it runs a type-erased job.
    private final class Job: @unchecked Sendable {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    private final class Slot<T>: @unchecked Sendable {
        var value: T?
    }

    /// Nil when no thread could be created.
    static func run<T>(_ body: @escaping () -> T) -> T? {
        let slot = Slot<T>()
        let context = Unmanaged.passRetained(Job { slot.value = body() }).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            Unmanaged<Job>.fromOpaque(raw!).takeUnretainedValue().body()
            return nil
        }, context)
        if rc == 0 { pthread_join(thread, nil) }
        Unmanaged<Job>.fromOpaque(context).release()
        return slot.value
    }
}

/// `ip` (iproute2), run to completion; a non-zero exit becomes an error carrying its stderr.
enum IPCommand {
    static let candidates = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]

    static var path: String? { candidates.first { access($0, X_OK) == 0 } }

    static func run(_ arguments: [String]) throws(NetworkNamespace.Failure) {
        guard let path else { throw NetworkNamespace.Failure(description: "iproute2 'ip' not found") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        do { try process.run() } catch { throw NetworkNamespace.Failure(description: "ip \(arguments.joined(separator: " ")): \(error)") }
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = String(decoding: message, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw NetworkNamespace.Failure(description: "ip \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
        }
    }
}
