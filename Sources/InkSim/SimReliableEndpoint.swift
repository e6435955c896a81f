import InkProtocol

/// What a workload needs from a reliable session on top of the datagram contract: hand it a
/// batch, take delivered batches out. The ARQ session conforms; tests use toy endpoints.
public protocol SimReliableEndpoint: DatagramEndpoint {
    /// Queues `batch` for reliable, in-order delivery to the peer.
    func submit(_ batch: [UInt8]) -> SimSubmitResult
    /// The next thing the session has to tell the application.
    func nextSessionEvent() -> SimSessionEvent?
    /// Current use of each bounded queue beside its bound, for the sweep's memory checks.
    var memoryUse: [SimMemoryUse] { get }
}

public enum SimSubmitResult: Equatable, Sendable {
    case accepted
    /// The session is full for now; the workload keeps the batch and tries again later.
    case backPressure
    /// The session will never take this batch (e.g. too large); a workload bug or a session bug.
    case rejected(String)
}

public enum SimSessionEvent: Equatable, Sendable {
    case delivered([UInt8])
    case peerUnreachable
    /// The session stopped for good (protocol violation); the sweep counts it as a correctness failure.
    case failed(String)
    /// Anything else the session reports (peer back, stats), named for the trace.
    case other(String)
}

/// One bounded queue of a session: how much it holds and the most it may hold.
public struct SimMemoryUse: Equatable, Sendable {
    public var name: String
    public var used: Int
    public var limit: Int
    public init(name: String, used: Int, limit: Int) {
        self.name = name
        self.used = used
        self.limit = limit
    }
}
