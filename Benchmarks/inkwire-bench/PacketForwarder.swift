import Glibc
import InkProtocol
import InkSim
import Synchronization

/// What one direction of a `PacketLink` did. Bytes are whole IP packets (headers included), so
/// they are what the transport under test put on the wire.
struct PacketLinkCounters: Sendable, Equatable {
    /// IPv4 packets read from the sending side's device (each got one impairment decision).
    var packets = 0
    var bytes = 0
    /// Copies written to the receiving side's device (duplicates included).
    var forwarded = 0
    var bytesForwarded = 0
    /// Lost to the loss model.
    var dropped = 0
    var bytesDropped = 0
    var duplicated = 0
    var reordered = 0
    /// Refused because the direction already held its bound of packets (tail drop).
    var queueFull = 0
    /// Refused by the receiving device.
    var writeFailed = 0
    /// Larger than the configuration's `maximumDatagramSize`.
    var oversize = 0
    /// Not IPv4 (dropped without a decision, so they never shift the seed's decisions).
    var ignored = 0
    /// Bytes of the packets (counted in `bytes` too) of UDP or TCP flows whose server-side port
    /// is one of the link's tallied ports: a benchmark can tell one flow's bytes apart.
    var talliedBytes = 0

    var json: String {
        "{\"packets\":\(packets),\"bytes\":\(bytes),\"forwarded\":\(forwarded),\"bytes_forwarded\":\(bytesForwarded),"
            + "\"dropped\":\(dropped),\"bytes_dropped\":\(bytesDropped),\"duplicated\":\(duplicated),\"reordered\":\(reordered),"
            + "\"queue_full\":\(queueFull),\"write_failed\":\(writeFailed),\"oversize\":\(oversize),\"ignored\":\(ignored),"
            + "\"tallied_bytes\":\(talliedBytes)}"
    }
}

/// Moves IP packets between the two TUN devices of a `PacketLink` on a thread of its own:
/// each packet gets the next decision of its direction's `LinkImpairment` and is written to the
/// other device at its due time. `ppoll` waits with microsecond timeouts, so a packet leaves
/// within scheduling noise of its due time (no millisecond timer rounding).
final class PacketForwarder: @unchecked Sendable {
    /// Packets read from one device per wake-up before the other gets a turn.
    static let readBatch = 64
    /// Upper bound of packets one direction may hold (the configuration's `queueCapacity` is
    /// clamped to it).
    static let maximumHeldPerDirection = 100_000
    /// Read buffer size: larger than any packet a 1500-MTU TUN device hands over.
    static let bufferSize = 65_536

    private enum Direction: Int { case toServer = 0, toClient = 1 }

    private struct Held {
        var due: UInt64
        var serial: UInt64
        var packet: [UInt8]
        var direction: Direction
    }

    private let serverFD: Int32
    private let clientFD: Int32
    private let heldBound: Int
    /// Server-side UDP/TCP ports whose packets are also counted in `talliedBytes`.
    private let talliedServerPorts: Set<UInt16>
    /// The forwarding thread's own state (touched only by that thread while it runs).
    private var impairments: [LinkImpairment]
    private var counters = [PacketLinkCounters(), PacketLinkCounters()]
    private var heldCount = [0, 0]
    private var heap = DueHeap<Held> { ($0.due, $0.serial) < ($1.due, $1.serial) }
    private var nextSerial: UInt64 = 0
    /// Copies of `counters` and the held count for other threads, refreshed after every wake-up.
    private let published = Mutex(([PacketLinkCounters(), PacketLinkCounters()], 0))
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var thread: pthread_t?

    /// Each direction gets its own decision stream, both derived from `seed` exactly as
    /// `LinkProxy` derives them (client-to-server first), so the two links decide alike.
    init(serverFD: Int32, clientFD: Int32, configuration: LinkConfiguration, seed: UInt64,
         talliedServerPorts: Set<UInt16> = []) throws(NetworkNamespace.Failure) {
        self.serverFD = serverFD
        self.clientFD = clientFD
        self.talliedServerPorts = talliedServerPorts
        var root = SimRandom(seed: seed)
        let toServer = LinkImpairment(configuration: configuration, seed: root.next())
        let toClient = LinkImpairment(configuration: configuration, seed: root.next())
        impairments = [toServer, toClient]
        heldBound = min(max(configuration.queueCapacity, 1), PacketForwarder.maximumHeldPerDirection)
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw NetworkNamespace.Failure(description: "pipe: \(String(cString: strerror(errno)))") }
        for fd in ends {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        wakeRead = ends[0]
        wakeWrite = ends[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    func start() throws(NetworkNamespace.Failure) {
        let context = Unmanaged.passRetained(self).toOpaque()
        var created = pthread_t()
        let rc = pthread_create(&created, nil, { raw in
            let forwarder = Unmanaged<PacketForwarder>.fromOpaque(raw!).takeRetainedValue()
            forwarder.forward()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<PacketForwarder>.fromOpaque(context).release()
            throw NetworkNamespace.Failure(description: "pthread_create: \(String(cString: strerror(rc)))")
        }
        thread = created
    }

    /// Stops the thread and waits for it; packets still held are discarded. Idempotent.
    func stop() {
        guard let running = thread else { return }
        thread = nil
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        pthread_join(running, nil)
    }

    /// Client-to-server and server-to-client counters, as of the forwarder's last wake-up.
    var snapshot: (toServer: PacketLinkCounters, toClient: PacketLinkCounters) {
        published.withLock { ($0.0[0], $0.0[1]) }
    }

    /// Packets held for their due time (both directions), as of the last wake-up.
    var held: Int { published.withLock { $0.1 } }

    private func forward() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: PacketForwarder.bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var fds = [
            pollfd(fd: clientFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: serverFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let now = monotonicMicroseconds()
            releaseDue(now)
            publish()
            for index in fds.indices { fds[index].revents = 0 }
            let waitMicroseconds = heap.first.map { $0.due > now ? $0.due - now : 0 }
            let rc = wait(&fds, microseconds: waitMicroseconds)
            if rc < 0 && errno != EINTR { return }
            if fds[2].revents != 0 { return }
            if fds[0].revents & Int16(POLLIN) != 0 { drain(clientFD, .toServer, buffer) }
            if fds[1].revents & Int16(POLLIN) != 0 { drain(serverFD, .toClient, buffer) }
        }
    }

    /// `ppoll` with a microsecond timeout (nil waits for input), or `poll` rounded up to whole
    /// milliseconds where the C library lacks `ppoll`.
    private func wait(_ fds: inout [pollfd], microseconds: UInt64?) -> Int32 {
        let count = nfds_t(fds.count)
        guard let ppoll = SystemCalls.ppoll else {
            let ms = microseconds.map { Int32(min(($0 + 999) / 1000, UInt64(Int32.max))) } ?? -1
            return poll(&fds, count, ms)
        }
        guard let microseconds else { return ppoll(&fds, count, nil, nil) }
        var timeout = timespec(tv_sec: Int(microseconds / 1_000_000), tv_nsec: Int(microseconds % 1_000_000) * 1000)
        return ppoll(&fds, count, &timeout, nil)
    }

    private func drain(_ fd: Int32, _ direction: Direction, _ buffer: UnsafeMutableRawBufferPointer) {
        for _ in 0..<PacketForwarder.readBatch {
            let n = read(fd, buffer.baseAddress, buffer.count)
            guard n > 0 else { return }
            admit(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), direction)
        }
    }

    private func admit(_ packet: UnsafeRawBufferPointer, _ direction: Direction) {
        let d = direction.rawValue
        guard packet[0] >> 4 == 4 else {
            counters[d].ignored += 1
            return
        }
        counters[d].packets += 1
        counters[d].bytes += packet.count
        if !talliedServerPorts.isEmpty, let port = PacketForwarder.serverPort(packet, toServer: direction == .toServer),
           talliedServerPorts.contains(port) {
            counters[d].talliedBytes += packet.count
        }
        let now = monotonicMicroseconds()
        switch impairments[d].decide(size: packet.count, now: Instant(microseconds: now)) {
        case .lost:
            counters[d].dropped += 1
            counters[d].bytesDropped += packet.count
        case .oversize:
            counters[d].oversize += 1
        case .deliver(let due, let duplicateDue, let reordered):
            if reordered { counters[d].reordered += 1 }
            let copy = [UInt8](packet)
            for (copyIndex, time) in [due, duplicateDue].compactMap({ $0 }).enumerated() {
                guard heldCount[d] < heldBound else {
                    counters[d].queueFull += 1
                    continue
                }
                if copyIndex == 1 { counters[d].duplicated += 1 }
                heldCount[d] += 1
                heap.push(Held(due: time.microseconds, serial: nextSerial, packet: copy, direction: direction))
                nextSerial += 1
            }
        }
    }

    /// The server side's port of an IPv4 UDP or TCP packet (its destination port going to the
    /// server, its source port coming back); nil for other packets and fragments.
    static func serverPort(_ packet: UnsafeRawBufferPointer, toServer: Bool) -> UInt16? {
        guard packet.count >= 20 else { return nil }
        let headerBytes = Int(packet[0] & 0x0F) * 4
        let fragmentOffset = (UInt16(packet[6] & 0x1F) << 8) | UInt16(packet[7])
        guard packet[9] == 17 || packet[9] == 6, fragmentOffset == 0, packet.count >= headerBytes + 4 else { return nil }
        let at = headerBytes + (toServer ? 2 : 0)
        return UInt16(packet[at]) << 8 | UInt16(packet[at + 1])
    }

    private func releaseDue(_ now: UInt64) {
        while let next = heap.first, next.due <= now {
            let held = heap.popFirst()!
            let d = held.direction.rawValue
            heldCount[d] -= 1
            let target = held.direction == .toServer ? serverFD : clientFD
            let written = held.packet.withUnsafeBytes { write(target, $0.baseAddress, $0.count) }
            if written == held.packet.count {
                counters[d].forwarded += 1
                counters[d].bytesForwarded += held.packet.count
            } else {
                counters[d].writeFailed += 1
            }
        }
    }

    private func publish() {
        let current = (counters, heap.count)
        published.withLock { $0 = current }
    }
}

/// A binary min-heap ordered by due time, then by arrival (serial), so packets due at the same
/// microsecond leave in the order they came.
struct DueHeap<Element> {
    private var items: [Element] = []
    private let before: (Element, Element) -> Bool

    init(before: @escaping (Element, Element) -> Bool) { self.before = before }

    var count: Int { items.count }
    var first: Element? { items.first }

    mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard before(items[child], items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popFirst() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count && before(items[left], items[smallest]) { smallest = left }
            if right < items.count && before(items[right], items[smallest]) { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
