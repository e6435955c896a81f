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
/// batches: each readable wake drains the kernel queue with recvmmsg (`receiveBatch` at a call)
/// into one slab allocated once, and handed each datagram to `onDatagram` as a borrowed buffer
/// (no copy, no sender address); sends are copied into a send slab and leave together with
/// sendmmsg at `flush()` (the load flushes at the end of every receive wake and every tick).
/// At 20,000 deliveries a second, one system call per datagram each way was a third of the
/// generator's time, and the generator shares the two cores with the daemon it measures.
final class FanoutSocket: WatcherOutput {
    /// Datagrams read or sent per system call.
    static let receiveBatch = 64
    static let sendBatch = 64
    /// Bytes per slab slot: above `FrameCodec.maxFrameBytes` (1472), so no frame is cut.
    static let slotBytes = 2048
    /// recvmmsg rounds per readable wake, so one busy socket cannot hold the loop.
    static let maxRoundsPerWake = 8

    let fd: Int32
    private let poll: Poll
    private let receiveSlab: UnsafeMutableRawPointer
    private let receiveHeaders: UnsafeMutablePointer<MultiMessage>
    private let receiveVectors: UnsafeMutablePointer<iovec>
    private let sendSlab: UnsafeMutableRawPointer
    private let sendHeaders: UnsafeMutablePointer<MultiMessage>
    private let sendVectors: UnsafeMutablePointer<iovec>
    private var pending = 0
    private var closed = false
    /// Each received datagram; the buffer is valid during the call only.
    private let onDatagram: (UnsafeRawBufferPointer) -> Void
    /// Datagrams the kernel refused (counted, dropped: the ARQ repairs it as a loss) and
    /// received datagrams longer than a slot (dropped).
    private(set) var sendFailures = 0
    private(set) var truncated = 0

    init(loop: EventLoop, server: SocketAddress, receiveBufferBytes: Int32, onDatagram: @escaping (UnsafeRawBufferPointer) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw InetSocket.Failure("socket") }
        var size = receiveBufferBytes
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var local = InetSocket.address("127.0.0.1", 0)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let connected = bound == 0 && server.withSockAddr { address, length in Glibc.connect(fd, address, length) } == 0
        guard connected, let poll = try? Poll(loop: loop, fd: fd) else {
            let failure = InetSocket.Failure("bind/connect \(server)")
            Glibc.close(fd)
            throw failure
        }
        self.fd = fd
        self.poll = poll
        self.onDatagram = onDatagram
        receiveSlab = .allocate(byteCount: FanoutSocket.receiveBatch * FanoutSocket.slotBytes, alignment: 16)
        receiveHeaders = .allocate(capacity: FanoutSocket.receiveBatch)
        receiveVectors = .allocate(capacity: FanoutSocket.receiveBatch)
        sendSlab = .allocate(byteCount: FanoutSocket.sendBatch * FanoutSocket.slotBytes, alignment: 16)
        sendHeaders = .allocate(capacity: FanoutSocket.sendBatch)
        sendVectors = .allocate(capacity: FanoutSocket.sendBatch)
        for i in 0..<FanoutSocket.receiveBatch {
            receiveVectors[i] = iovec(iov_base: receiveSlab + i * FanoutSocket.slotBytes, iov_len: FanoutSocket.slotBytes)
            receiveHeaders[i] = MultiMessage(vector: receiveVectors + i)
        }
        for i in 0..<FanoutSocket.sendBatch {
            sendVectors[i] = iovec(iov_base: sendSlab + i * FanoutSocket.slotBytes, iov_len: 0)
            sendHeaders[i] = MultiMessage(vector: sendVectors + i)
        }
        try poll.start(.readable) { [unowned self] _, _ in self.readable() }
    }

    deinit {
        receiveSlab.deallocate()
        receiveHeaders.deallocate()
        receiveVectors.deallocate()
        sendSlab.deallocate()
        sendHeaders.deallocate()
        sendVectors.deallocate()
    }

    /// The bound port (for the kernel's drop counters).
    var localPort: UInt16 { InetSocket.localPort(fd) }

    private func readable() {
        var rounds = 0
        while !closed && rounds < FanoutSocket.maxRoundsPerWake {
            rounds += 1
            let n = MultiMessage.receive(fd, receiveHeaders, UInt32(FanoutSocket.receiveBatch), Int32(MSG_DONTWAIT), nil)
            guard n > 0 else { break }
            for i in 0..<Int(n) {
                let header = receiveHeaders + i
                if header.pointee.header.msg_flags & Int32(MSG_TRUNC) != 0 {
                    truncated += 1
                } else {
                    onDatagram(UnsafeRawBufferPointer(start: receiveSlab + i * FanoutSocket.slotBytes, count: Int(header.pointee.length)))
                }
                header.pointee.header.msg_flags = 0
            }
            if Int(n) < FanoutSocket.receiveBatch { break }
        }
        flush()
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
            let n = MultiMessage.send(fd, sendHeaders + sent, UInt32(pending - sent), 0)
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
        // The descriptor closes once libuv has let go of it.
        poll.onClose = { [fd] in _ = Glibc.close(fd) }
        poll.close()
    }
}

/// glibc's `struct mmsghdr` (Swift's Glibc module leaves out the GNU extensions, so the layout
/// is spelled here: a msghdr, then the datagram length) and the two calls, found with dlsym.
struct MultiMessage {
    var header: msghdr
    var length: UInt32 = 0

    init(vector: UnsafeMutablePointer<iovec>) {
        header = msghdr(msg_name: nil, msg_namelen: 0, msg_iov: vector, msg_iovlen: 1, msg_control: nil, msg_controllen: 0, msg_flags: 0)
    }

    typealias ReceiveCall = @convention(c) (Int32, UnsafeMutableRawPointer, UInt32, Int32, UnsafeMutableRawPointer?) -> Int32
    typealias SendCall = @convention(c) (Int32, UnsafeMutableRawPointer, UInt32, Int32) -> Int32

    static let receive: ReceiveCall = unsafeBitCast(dlsym(nil, "recvmmsg"), to: ReceiveCall.self)
    static let send: SendCall = unsafeBitCast(dlsym(nil, "sendmmsg"), to: SendCall.self)
}
