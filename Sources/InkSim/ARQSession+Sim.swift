import InkProtocol

/// The ARQ session as the simulator's workloads drive it.
extension ARQSession: SimReliableEndpoint {
    public func submit(_ batch: [UInt8]) -> SimSubmitResult {
        do {
            try send(batch)
            return .accepted
        } catch .sendQueueFull {
            return .backPressure
        } catch {
            return .rejected("\(error)")
        }
    }

    public func nextSessionEvent() -> SimSessionEvent? {
        guard let event = pollEvent() else { return nil }
        switch event {
        case .delivered(let batch): return .delivered(batch)
        case .peerUnreachable: return .peerUnreachable
        case .peerReachable: return .other("peerReachable")
        case .peerClosed: return .other("peerClosed")
        case .failed(let error): return .failed("\(error)")
        }
    }

    public var memoryUse: [SimMemoryUse] {
        let s = stats
        return [
            SimMemoryUse(name: "send queue bytes", used: s.queuedBytes, limit: configuration.maxQueuedBytes),
            SimMemoryUse(name: "segments in flight", used: s.segmentsInFlight, limit: Int(configuration.sendWindow)),
        ]
    }
}
