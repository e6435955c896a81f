import CLibUV
import Glibc

/// The datagrams a batching `UDPSocket` holds until its next flush: copies of the payloads and
/// of their destinations in memory allocated once, already laid out as the message array
/// sendmmsg(2) takes, so a flush is one system call for up to `capacity` datagrams.
final class UDPSendBatch {
    /// Most datagrams held.
    let capacity: Int
    /// Most payload bytes held (at least one datagram of `UDPSocket.maximumDatagramBytes`).
    let payloadCapacity: Int
    private let payloads: UnsafeMutableRawPointer
    private let destinations: UnsafeMutablePointer<sockaddr_storage>
    private let vectors: UnsafeMutablePointer<iovec>
    /// The sendmmsg(2) array: entry i points at payload i and destination i.
    let messages: UnsafeMutablePointer<inkuv_mmsghdr>
    /// Datagrams held, and the payload bytes they take.
    private(set) var count = 0
    private(set) var payloadBytes = 0

    init(capacity: Int, payloadCapacity: Int) {
        self.capacity = max(capacity, 1)
        self.payloadCapacity = max(payloadCapacity, UDPSocket.maximumDatagramBytes)
        payloads = .allocate(byteCount: self.payloadCapacity, alignment: 16)
        destinations = .allocate(capacity: self.capacity)
        vectors = .allocate(capacity: self.capacity)
        messages = .allocate(capacity: self.capacity)
        vectors.initialize(repeating: iovec(iov_base: nil, iov_len: 0), count: self.capacity)
        destinations.initialize(repeating: sockaddr_storage(), count: self.capacity)
        for i in 0..<self.capacity {
            var message = inkuv_mmsghdr()
            message.msg_hdr.msg_iov = vectors + i
            message.msg_hdr.msg_iovlen = 1
            (messages + i).initialize(to: message)
        }
    }

    deinit {
        payloads.deallocate()
        destinations.deallocate()
        vectors.deallocate()
        messages.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    /// Whether one more datagram of `length` bytes fits.
    func hasRoom(for length: Int) -> Bool {
        count < capacity && payloadBytes + length <= payloadCapacity
    }

    /// Copies a datagram in, after the ones held (the caller checked `hasRoom`). A nil
    /// destination sends to the connected peer.
    func append(_ bytes: UnsafeRawBufferPointer, to destination: UnsafePointer<sockaddr>?, length: socklen_t) {
        let payload = payloads + payloadBytes
        if let source = bytes.baseAddress, bytes.count > 0 {
            payload.copyMemory(from: source, byteCount: bytes.count)
        }
        vectors[count] = iovec(iov_base: payload, iov_len: bytes.count)
        if let destination {
            let size = min(Int(length), MemoryLayout<sockaddr_storage>.size)
            UnsafeMutableRawPointer(destinations + count).copyMemory(from: destination, byteCount: size)
            messages[count].msg_hdr.msg_name = UnsafeMutableRawPointer(destinations + count)
            messages[count].msg_hdr.msg_namelen = socklen_t(size)
        } else {
            messages[count].msg_hdr.msg_name = nil
            messages[count].msg_hdr.msg_namelen = 0
        }
        count += 1
        payloadBytes += bytes.count
    }

    /// The payload of datagram `index`.
    func payload(_ index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: vectors[index].iov_base, count: vectors[index].iov_len)
    }

    /// The destination of datagram `index` (nil: the connected peer).
    func destination(_ index: Int) -> UnsafePointer<sockaddr>? {
        messages[index].msg_hdr.msg_name.map { UnsafePointer($0.assumingMemoryBound(to: sockaddr.self)) }
    }

    /// Forgets every datagram held (the memory stays for the next batch).
    func removeAll() {
        count = 0
        payloadBytes = 0
    }
}
