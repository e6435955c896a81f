@testable import InkProtocol

/// A device and a daemon sealed session on a virtual network (`FakeCrypto`: the protocol is
/// under test, not the cipher). The daemon's session is made from the first initiation that
/// reaches it, as the daemon does. Addresses are small integers: the daemon keeps its session's
/// address and candidate as `NativeDatagramSession` does; datagrams the daemon sends go to one of
/// them, and `fault` decides each datagram's fate.
final class SealedPairDriver {
    enum Direction { case toDaemon, toDevice }
    struct Datagram {
        var bytes: [UInt8]
        var direction: Direction
        /// Device side: the address it came from (to the daemon) or was sent to.
        var address: Int
    }

    static let crypto = FakeCrypto(seed: 3)
    static let staticKey = StaticKeyPair(privateKey: crypto.randomBytes(32), crypto: crypto)
    static let join: [UInt8] = [1, 1, 0]

    let device: SealedDatagramSession
    private(set) var daemon: SealedDatagramSession?
    private(set) var now: Instant
    /// The device's address now (a roaming device moves it).
    var deviceAddress = 1
    /// The daemon's view: its session's address, and the candidate being validated.
    private(set) var daemonAddress: Int?
    private(set) var candidate: Int?
    /// Everything put on the wire, in order (what an eavesdropper sees).
    private(set) var wire: [Datagram] = []
    var fault: (Datagram, Int) -> [Instant.Duration] = { _, _ in [.milliseconds(5)] }
    private(set) var deliveredToDevice: [[UInt8]] = []
    private(set) var deliveredToDaemon: [[UInt8]] = []
    private(set) var deviceEvents: [SealedEvent] = []
    private(set) var daemonEvents: [SealedEvent] = []
    private(set) var verdicts: [DatagramVerdict] = []
    /// The joins the daemon's handshakes carried.
    private(set) var joins: [[UInt8]] = []
    private var inFlight: [(due: Instant, order: Int, datagram: Datagram)] = []
    private var order = 0
    /// Bytes the daemon sent to each address (the amplification limit's subject).
    private(set) var sentTo: [Int: Int] = [:]

    init(sealing: SealingConfiguration = SealingConfiguration(), arq: ARQConfiguration = ARQConfiguration(),
         start: Instant = .milliseconds(1000), serverKey: [UInt8]? = SealedPairDriver.staticKey.publicKey) {
        now = start
        self.sealing = sealing
        self.arq = arq
        device = SealedDatagramSession(deviceConnectionID: 77, serverKey: serverKey, join: SealedPairDriver.join,
                                       crypto: SealedPairDriver.crypto, arq: arq, sealing: sealing, now: start)
    }

    private let sealing: SealingConfiguration
    private let arq: ARQConfiguration

    /// A datagram put on the wire toward the daemon from `address` (an attacker's injection).
    func inject(_ bytes: [UInt8], from address: Int, delay: Instant.Duration = .zero) {
        inFlight.append((now + delay, order, Datagram(bytes: bytes, direction: .toDaemon, address: address)))
        order += 1
    }

    /// A datagram put on the wire toward the device (a forged reset, close...).
    func injectToDevice(_ bytes: [UInt8]) {
        inFlight.append((now, order, Datagram(bytes: bytes, direction: .toDevice, address: deviceAddress)))
        order += 1
    }

    func flush() {
        var progress = true
        while progress {
            progress = false
            while let d = device.pollTransmit(now: now) {
                progress = true
                send(Datagram(bytes: d.bytes, direction: .toDaemon, address: deviceAddress))
            }
            if let daemon {
                while let d = daemon.pollTransmit(now: now) {
                    progress = true
                    guard let to = d.toCandidate ? candidate : daemonAddress else { continue }
                    sentTo[to, default: 0] += d.bytes.count
                    send(Datagram(bytes: d.bytes, direction: .toDevice, address: to))
                }
                while let e = daemon.pollEvent() {
                    progress = true
                    daemonEvents.append(e)
                    switch e {
                    case .delivered(let m): deliveredToDaemon.append(m)
                    case .moved:
                        daemonAddress = candidate
                        candidate = nil
                    default: break
                    }
                }
            }
            while let e = device.pollEvent() {
                progress = true
                deviceEvents.append(e)
                if case .delivered(let m) = e { deliveredToDevice.append(m) }
            }
        }
    }

    private func send(_ d: Datagram) {
        let index = wire.count
        wire.append(d)
        for delay in fault(d, index) {
            inFlight.append((now + delay, order, d))
            order += 1
        }
    }

    private func deliver(_ d: Datagram) {
        switch d.direction {
        case .toDevice:
            // A device receives only what is sent to where it is.
            guard d.address == deviceAddress else { return }
            device.handleDatagram(d.bytes, now: now)
        case .toDaemon:
            if let daemon {
                let source: PathSource = d.address == daemonAddress ? .current : d.address == candidate ? .candidate : .other
                let verdict = daemon.handleDatagram(d.bytes, from: source, now: now)
                verdicts.append(verdict)
                if verdict == .newCandidate { candidate = d.address }
            } else if PacketCodec.peek(d.bytes)?.type == .initiation,
                      case .success(let (session, join)) = SealedDatagramSession.accept(
                        initiation: d.bytes, staticKey: SealedPairDriver.staticKey,
                        reset: StatelessReset(staticPrivateKey: SealedPairDriver.staticKey.privateKey, crypto: SealedPairDriver.crypto),
                        crypto: SealedPairDriver.crypto, arq: arq, sealing: sealing, now: now) {
                joins.append(join)
                daemon = session
                daemonAddress = d.address
            }
        }
    }


    /// Advances the virtual clock to `end` in steps of `step`.
    func run(for duration: Instant.Duration, step: Instant.Duration = .milliseconds(1)) {
        let end = now + duration
        flush()
        while now < end {
            now = now + step
            inFlight.sort { ($0.due, $0.order) < ($1.due, $1.order) }
            while let first = inFlight.first, !(now < first.due) {
                inFlight.removeFirst()
                deliver(first.datagram)
                flush()
            }
            for s in [device] + (daemon.map { [$0] } ?? []) {
                if let t = s.pollTimeout(), !(now < t) { s.handleTimeout(now: now) }
            }
            flush()
        }
    }
}
