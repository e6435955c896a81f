/// Where a received datagram came from, as the IO layer sees it: the session's address, its
/// candidate address (one that may become the session's), or any other.
public enum PathSource: Sendable, Equatable {
    case current
    case candidate
    case other
}

/// The daemon's side of path validation and the amplification limit (docs/protocol.md 8.1): one
/// decision made on decoded, authenticated packets, so a datagram is opened and decoded once.
///
/// An address that has not proved it receives is sent at most `amplificationFactor` times the
/// bytes of the packets that opened from it (the initiation counts). The session's first
/// address is proved by the device's first transport packet (only the receiver of the handshake
/// response could seal it); a candidate is proved by an opened packet from it that echoes the
/// timestamp of a probe sent to it, and then becomes the session's address.
struct PathValidator {
    /// RFC 9000's anti-amplification factor.
    static let amplificationFactor = 3
    /// Probe timestamps remembered per candidate.
    static let rememberedProbes = 8

    struct Budget {
        var validated = false
        var received = 0
        var sent = 0

        func allows(_ size: Int) -> Bool { validated || sent + size <= received * PathValidator.amplificationFactor }
    }

    private(set) var current = Budget()
    private(set) var candidate: Budget?
    /// Timestamps of the probes sent to the candidate.
    private var probes: [UInt32] = []
    /// A probe should go to the candidate (it sent a packet since the last one went).
    private(set) var probeWanted = false

    var isCurrentValidated: Bool { current.validated }

    mutating func noteReceived(_ bytes: Int, from source: PathSource) {
        switch source {
        case .current: current.received += bytes
        case .candidate: candidate?.received += bytes
        case .other: break
        }
    }

    /// The device proved the current address (its packet opened from there).
    mutating func validateCurrent() { current.validated = true }

    /// An opened packet from a new address: it is the candidate now (a previous one is dropped).
    mutating func adoptCandidate(receivedBytes: Int) {
        candidate = Budget(validated: false, received: receivedBytes, sent: 0)
        probes = []
        probeWanted = true
    }

    /// An opened packet from the candidate: true when it echoes one of the candidate's probes,
    /// and the candidate became the current address.
    mutating func candidateAnswered(echo: UInt32?) -> Bool {
        guard candidate != nil else { return false }
        guard let echo, probes.contains(echo) else {
            probeWanted = true
            return false
        }
        current = Budget(validated: true, received: candidate!.received, sent: candidate!.sent)
        candidate = nil
        probes = []
        probeWanted = false
        return true
    }

    func allows(_ size: Int, toCandidate: Bool) -> Bool {
        toCandidate ? (candidate?.allows(size) ?? false) : current.allows(size)
    }

    mutating func noteSent(_ size: Int, toCandidate: Bool) {
        if toCandidate { candidate?.sent += size } else { current.sent += size }
    }

    mutating func noteProbeSent(timestamp: UInt32, size: Int) {
        probeWanted = false
        candidate?.sent += size
        if probes.count == PathValidator.rememberedProbes { probes.removeFirst() }
        probes.append(timestamp)
    }
}
