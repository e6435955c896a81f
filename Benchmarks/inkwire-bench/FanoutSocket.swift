import Glibc
import InkUV

/// Where a watcher's datagrams go: a `FanoutSocket` (batched) or a plain `UDPSocket`.
protocol WatcherOutput: AnyObject {
    func transmit(_ datagram: [UInt8])
}

extension UDPSocket: WatcherOutput {
    func transmit(_ datagram: [UInt8]) { _ = try? send(datagram) }
}

/// A connected UDP socket shared by many watchers of the load generator, read and written in
/// batches, on the load's clock rather than on every datagram: `drain()` (once per loop tick)
/// empties the kernel queue with recvmmsg (`receiveBatch` at a call) into one slab allocated
/// once, and hands each datagram to `onDatagram` as a borrowed buffer with the time the kernel
/// queued it (SO_TIMESTAMPNS: when the relay's send reached the watcher, whenever the load
/// reads it); sends are copied into a send slab and leave together with sendmmsg at `flush()`.
/// At 20,000 deliveries a second, waking for every datagram (epoll, context switches) and a system
/// call per datagram each way cost the generator about a quarter of its time, on the two cores it
/// shares with the daemon it measures.
final class FanoutSocket: WatcherOutput {
    /// Datagrams read or sent per system call.
    static let receiveBatch = 64
    static let sendBatch = 64
    /// Bytes per slab slot: above `FrameCodec.maxFrameBytes` (1472), so no frame is cut.
    static let slotBytes = 2048
    /// recvmmsg rounds per `drain()`, so one flooded socket cannot hold the loop.
    static let maxRoundsPerDrain = 64
    /// Control bytes per received datagram: one cmsghdr (16) and a timespec (16), with room.
    static let controlBytes = 64
    /// SO_TIMESTAMPNS / SCM_TIMESTAMPNS on x86_64 and arm64 (asm-generic/socket.h, 64-bit
    /// time_t; Swift's Glibc module does not carry the macro).
    static let timestampOption: Int32 = 35

    let fd: Int32
    private let receiveSlab: UnsafeMutableRawPointer
    private let receiveControl: UnsafeMutableRawPointer
    private let receiveHeaders: UnsafeMutablePointer<MultiMessage>
    private let receiveVectors: UnsafeMutablePointer<iovec>
    private let sendSlab: UnsafeMutableRawPointer
    private let sendHeaders: UnsafeMutablePointer<MultiMessage>
    private let sendVectors: UnsafeMutablePointer<iovec>
    private var pending = 0
    private var closed = false
    /// Each received datagram and when the kernel queued it (µs, `EventLoop.now`'s clock); the
    /// buffer is valid during the call only.
    private let onDatagram: (UnsafeRawBufferPointer, UInt64) -> Void
    /// Datagrams the kernel refused (counted, dropped: the ARQ repairs it as a loss) and
    /// received datagrams longer than a slot (dropped).
    private(set) var sendFailures = 0
    private(set) var truncated = 0

    init(server: SocketAddress, receiveBufferBytes: Int32, onDatagram: @escaping (UnsafeRawBufferPointer, UInt64) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw InetSocket.Failure("socket") }
        var size = receiveBufferBytes
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, FanoutSocket.timestampOption, &on, socklen_t(MemoryLayout<Int32>.size))
        var local = InetSocket.address("127.0.0.1", 0)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let connected = bound == 0 && server.withSockAddr { address, length in Glibc.connect(fd, address, length) } == 0
        guard connected else {
            let failure = InetSocket.Failure("bind/connect \(server)")
            Glibc.close(fd)
            throw failure
        }
        self.fd = fd
        self.onDatagram = onDatagram
        receiveSlab = .allocate(byteCount: FanoutSocket.receiveBatch * FanoutSocket.slotBytes, alignment: 16)
        receiveControl = .allocate(byteCount: FanoutSocket.receiveBatch * FanoutSocket.controlBytes, alignment: 16)
        receiveHeaders = .allocate(capacity: FanoutSocket.receiveBatch)
        receiveVectors = .allocate(capacity: FanoutSocket.receiveBatch)
        sendSlab = .allocate(byteCount: FanoutSocket.sendBatch * FanoutSocket.slotBytes, alignment: 16)
        sendHeaders = .allocate(capacity: FanoutSocket.sendBatch)
        sendVectors = .allocate(capacity: FanoutSocket.sendBatch)
        for i in 0..<FanoutSocket.receiveBatch {
            receiveVectors[i] = iovec(iov_base: receiveSlab + i * FanoutSocket.slotBytes, iov_len: FanoutSocket.slotBytes)
            receiveHeaders[i] = MultiMessage(vector: receiveVectors + i)
            receiveHeaders[i].msg_hdr.msg_control = receiveControl + i * FanoutSocket.controlBytes
            receiveHeaders[i].msg_hdr.msg_controllen = FanoutSocket.controlBytes
        }
        for i in 0..<FanoutSocket.sendBatch {
            sendVectors[i] = iovec(iov_base: sendSlab + i * FanoutSocket.slotBytes, iov_len: 0)
            sendHeaders[i] = MultiMessage(vector: sendVectors + i)
        }
    }

    deinit {
        receiveSlab.deallocate()
        receiveControl.deallocate()
        receiveHeaders.deallocate()
        receiveVectors.deallocate()
        sendSlab.deallocate()
        sendHeaders.deallocate()
        sendVectors.deallocate()
    }

    /// The bound port (for the kernel's drop counters).
    var localPort: UInt16 { InetSocket.localPort(fd) }

    /// Hands over every datagram queued so far, then sends what that queued. `now` (µs on
    /// `EventLoop.now`'s clock) maps the kernel's wall-clock stamps onto that clock; a datagram
    /// without a stamp counts as arrived at `now`.
    func drain(now: UInt64) {
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        // Wall-clock µs minus loop-clock µs, read together (a µs apart at most).
        let offset = Int64(wall.tv_sec) * 1_000_000 + Int64(wall.tv_nsec) / 1000 - Int64(now)
        var rounds = 0
        while !closed && rounds < FanoutSocket.maxRoundsPerDrain {
            rounds += 1
            let n = MultipleMessages.receive(fd, receiveHeaders, UInt32(FanoutSocket.receiveBatch), Int32(MSG_DONTWAIT), nil)
            guard n > 0 else { break }
            for i in 0..<Int(n) {
                let header = receiveHeaders + i
                if header.pointee.msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0 {
                    truncated += 1
                } else {
                    let stamp = FanoutSocket.timestamp(header.pointee.msg_hdr).map { UInt64(max(0, $0 - offset)) } ?? now
                    onDatagram(UnsafeRawBufferPointer(start: receiveSlab + i * FanoutSocket.slotBytes, count: Int(header.pointee.msg_len)),
                               min(stamp, now))
                }
                header.pointee.msg_hdr.msg_flags = 0
                header.pointee.msg_hdr.msg_controllen = FanoutSocket.controlBytes
            }
            if Int(n) < FanoutSocket.receiveBatch { break }
        }
        flush()
    }

    /// The SCM_TIMESTAMPNS stamp of a received message, wall-clock µs.
    private static func timestamp(_ header: msghdr) -> Int64? {
        // One control message: cmsghdr (len 8, level 4, type 4), then the timespec at 16.
        guard header.msg_controllen >= 32, let control = header.msg_control else { return nil }
        let level = control.load(fromByteOffset: 8, as: Int32.self)
        let type = control.load(fromByteOffset: 12, as: Int32.self)
        guard level == SOL_SOCKET, type == FanoutSocket.timestampOption else { return nil }
        let seconds = control.load(fromByteOffset: 16, as: Int64.self)
        let nanoseconds = control.load(fromByteOffset: 24, as: Int64.self)
        return seconds * 1_000_000 + nanoseconds / 1000
    }

    /// Queues one datagram for the next `flush()` (flushing first when the batch is full).
    func transmit(_ datagram: [UInt8]) {
        guard !closed else { return }
        guard datagram.count <= FanoutSocket.slotBytes else {
            sendFailures += 1
            return
        }
        if pending == FanoutSocket.sendBatch { flush() }
        let slot = sendSlab + pending * FanoutSocket.slotBytes
        datagram.withUnsafeBytes { slot.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        sendVectors[pending].iov_len = datagram.count
        pending += 1
    }

    /// Sends every queued datagram, in order.
    func flush() {
        var sent = 0
        while sent < pending && !closed {
            let n = MultipleMessages.send(fd, sendHeaders + sent, UInt32(pending - sent), 0)
            if n > 0 {
                sent += Int(n)
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                // A full send buffer (EAGAIN) or a refused datagram: drop it, as a lossy link
                // would, and go on with the rest.
                sendFailures += 1
                sent += 1
            }
        }
        pending = 0
    }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }
}

/// One datagram of a sendmmsg/recvmmsg call: InkUV's `MultipleMessageHeader` (glibc's
/// `struct mmsghdr`, declared by the libuv shim), with the calls in `MultipleMessages`.
typealias MultiMessage = MultipleMessageHeader

extension MultipleMessageHeader {
    init(vector: UnsafeMutablePointer<iovec>) {
        self.init()
        msg_hdr = msghdr(msg_name: nil, msg_namelen: 0, msg_iov: vector, msg_iovlen: 1, msg_control: nil, msg_controllen: 0, msg_flags: 0)
    }
}
