import CMosquitto
import InkUV

/// libmosquitto's global setup, run once per process before the first client is made.
private let mosquittoLibraryInitialised: Int32 = mosquitto_lib_init()

/// An MQTT client (libmosquitto) driven from one InkUV loop, with no thread of its own: the
/// client's socket is watched with a `Poll` (readable always, writable while libmosquitto has
/// bytes queued), keepalive and timeouts run on a `LoopTimer`, and a lost or refused connection
/// is retried after a bounded exponential backoff. Subscriptions are remembered and sent again
/// after every reconnect (the session is clean).
///
/// Use from the loop's thread only. Callbacks (`onConnect`, `onDisconnect`, `onMessage`) run on
/// the loop, never inside a libmosquitto call, so they may publish, subscribe or `close()`.
public final class MQTTClient {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int32
        /// Client identifier; nil lets libmosquitto pick a random one.
        public var clientID: String?
        /// MQTT keepalive, seconds (the broker drops a silent client after 1.5 times this).
        public var keepaliveSeconds: Int32 = 10
        /// Reconnect waits: first retry after `minimum`, doubling up to `maximum` (µs).
        public var reconnectMinimumMicroseconds: UInt64 = 100_000
        public var reconnectMaximumMicroseconds: UInt64 = 5_000_000
        /// A connect that has no CONNACK after this long (µs) is abandoned and retried.
        public var connectTimeoutMicroseconds: UInt64 = 5_000_000
        /// How often libmosquitto's housekeeping (`mosquitto_loop_misc`: pings) runs, µs.
        public var housekeepingIntervalMicroseconds: UInt64 = 100_000
        /// TCP_NODELAY on the broker socket: every packet leaves at once (see `init`).
        public var noDelay = true
        /// Largest payload `publish` accepts (bridge chunks stay well under brokers' limits).
        public var maximumPayloadBytes = 1 << 20
        /// User name and password sent in CONNECT (the broker's `password_file` and ACLs).
        public var username: String?
        public var password: String?
        /// TLS to the broker (`mqtts://`); nil: plain TCP.
        public var tls: TLS?

        public init(host: String, port: Int32, clientID: String? = nil) {
            self.host = host
            self.port = port
            self.clientID = clientID
        }
    }

    /// TLS through libmosquitto (OpenSSL): the broker's certificate must chain to `caFile` (or
    /// a CA in `caDirectory`) and name the host connected to; TLS 1.2 or newer.
    public struct TLS: Sendable, Equatable {
        /// PEM file of the CA certificates that may sign the broker's certificate.
        public var caFile: String?
        /// Directory of hashed CA certificates (`c_rehash`), used when `caFile` is nil.
        public var caDirectory: String?
        /// Client certificate (PEM) and its unencrypted private key, for brokers that require
        /// one (`require_certificate true`); both or neither.
        public var certificateFile: String?
        public var keyFile: String?

        public init(caFile: String? = nil, caDirectory: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.caDirectory = caDirectory
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    /// One received message.
    public struct Message: Sendable, Equatable {
        public let topic: String
        public let payload: [UInt8]
        public init(topic: String, payload: [UInt8]) {
            self.topic = topic
            self.payload = payload
        }
    }

    public enum State: Sendable, Equatable {
        /// Not started yet.
        case idle
        /// TCP connect or CONNECT/CONNACK in progress.
        case connecting
        /// CONNACK accepted; publish and subscribe go out now.
        case connected
        /// Waiting for the backoff before the next attempt.
        case waitingToReconnect
        case closed
    }

    /// Longest topic accepted (MQTT encodes topic lengths in 16 bits).
    public static let maximumTopicBytes = 65_535
    /// Subscriptions remembered for resubscription.
    public static let maximumSubscriptions = 1024
    /// libmosquitto error lines kept per connection attempt, and their length (they explain a
    /// failed attempt: a TLS handshake's OpenSSL errors, an unreadable key).
    static let maximumLibraryErrors = 4
    static let maximumLibraryErrorBytes = 300

    public let configuration: Configuration
    public private(set) var state: State = .idle
    /// Why the last attempt or connection ended, if it did.
    public private(set) var lastError: MQTTError?
    /// Successful connects so far (the first one included).
    public private(set) var connectCount = 0

    /// Called after each successful connect, once remembered subscriptions are sent again.
    public var onConnect: (() -> Void)?
    /// Called when an established connection is lost (a reconnect is already scheduled).
    public var onDisconnect: ((MQTTError) -> Void)?
    /// Called when an attempt fails before CONNACK (refused, unreachable, TLS); it is retried.
    public var onConnectFailed: ((MQTTError) -> Void)?
    public var onMessage: ((Message) -> Void)?

    private let loop: EventLoop
    private var mosq: OpaquePointer?
    private var poll: Poll?
    private var pollEvents: Poll.Events = []
    private let housekeeping: LoopTimer
    private let reconnectTimer: LoopTimer
    private var backoff: MQTTBackoff
    private var attemptStartedAt: UInt64 = 0
    private var subscriptions: [String] = []
    /// Set by libmosquitto callbacks, acted on once the library call has returned.
    private var pendingLoss: MQTTError?
    private var pendingEvents: [Event] = []
    /// What libmosquitto logged as errors during the current attempt or connection.
    private var libraryErrors: [String] = []

    private enum Event {
        case connected
        case connectFailed(MQTTError)
        case disconnected(MQTTError)
        case message(Message)
    }

    public init(loop: EventLoop, configuration: Configuration) throws(MQTTError) {
        _ = mosquittoLibraryInitialised
        self.loop = loop
        self.configuration = configuration
        self.backoff = MQTTBackoff(minimumMicroseconds: configuration.reconnectMinimumMicroseconds,
                                   maximumMicroseconds: configuration.reconnectMaximumMicroseconds)
        do {
            housekeeping = try LoopTimer(loop: loop)
            reconnectTimer = try LoopTimer(loop: loop)
        } catch {
            throw MQTTError(code: MOSQ_ERR_UNKNOWN.rawValue, operation: "timer for MQTT client: \(error)")
        }
        let handle: OpaquePointer? = if let id = configuration.clientID {
            id.withCString { mosquitto_new($0, true, nil) }
        } else {
            mosquitto_new(nil, true, nil)
        }
        guard let handle else {
            housekeeping.close()
            reconnectTimer.close()
            throw MQTTError(code: MOSQ_ERR_NOMEM.rawValue, operation: "mosquitto_new")
        }
        mosq = handle
        if let username = configuration.username {
            let rc = mosquitto_username_pw_set(handle, username, configuration.password)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                mosquitto_destroy(handle)
                mosq = nil
                housekeeping.close()
                reconnectTimer.close()
                throw MQTTError(code: rc, operation: "mosquitto_username_pw_set")
            }
        }
        if let tls = configuration.tls {
            // No passphrase prompt: a daemon has no terminal, an encrypted key simply fails.
            let rc = mosquitto_tls_set(handle, tls.caFile, tls.caDirectory, tls.certificateFile, tls.keyFile) { _, _, _, _ in 0 }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                mosquitto_destroy(handle)
                mosq = nil
                housekeeping.close()
                reconnectTimer.close()
                let files = [tls.caFile, tls.caDirectory, tls.certificateFile, tls.keyFile].compactMap { $0 }.joined(separator: ", ")
                throw MQTTError(code: rc, operation: "TLS settings (\(files)): a file or directory cannot be read")
            }
        }
        // Nagle off (libmosquitto leaves it on): a small write waiting behind an unacknowledged
        // one (a PUBACK just sent, which the broker acknowledges only with its delayed ACK) would
        // hold every publish behind it for tens of milliseconds.
        if configuration.noDelay { mosquitto_int_option(handle, MOSQ_OPT_TCP_NODELAY, 1) }
        // Unretained: callbacks only run inside libmosquitto calls made by this object.
        mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
        mosquitto_connect_callback_set(handle) { _, object, rc in
            MQTTClient.from(object)?.libraryConnected(rc)
        }
        mosquitto_disconnect_callback_set(handle) { _, object, rc in
            MQTTClient.from(object)?.libraryDisconnected(rc)
        }
        mosquitto_log_callback_set(handle) { _, object, level, text in
            guard level & Int32(MOSQ_LOG_ERR) != 0, let text else { return }
            MQTTClient.from(object)?.libraryLogged(String(cString: text))
        }
        mosquitto_message_callback_set(handle) { _, object, message in
            guard let message else { return }
            MQTTClient.from(object)?.libraryReceived(message.pointee)
        }
    }

    deinit { close() }

    /// Starts connecting; failures are retried with backoff until `close()`.
    public func start() {
        guard state == .idle else { return }
        housekeeping.start(afterMicroseconds: configuration.housekeepingIntervalMicroseconds,
                           repeatingEveryMicroseconds: configuration.housekeepingIntervalMicroseconds) { [weak self] in
            self?.runHousekeeping()
        }
        attemptConnect()
    }

    /// Publishes `payload` to `topic` with QoS 1 (at least once). Only while connected: the
    /// bridge re-offers lost batches from its durable log, so nothing is queued here.
    /// Returns libmosquitto's message id.
    @discardableResult
    public func publish(topic: String, payload: [UInt8], retain: Bool = false) throws(MQTTError) -> Int32 {
        guard let mosq, state != .closed else { throw MQTTError(code: MQTTError.closed, operation: "publish \(topic): closed") }
        guard topic.utf8.count <= MQTTClient.maximumTopicBytes else {
            throw MQTTError(code: MQTTError.invalidArgument, operation: "publish: topic too long")
        }
        guard payload.count <= configuration.maximumPayloadBytes else {
            throw MQTTError(code: MQTTError.payloadTooLarge, operation: "publish \(topic): \(payload.count) bytes")
        }
        guard state == .connected else { throw MQTTError(code: MQTTError.notConnected, operation: "publish \(topic)") }
        var messageID: Int32 = 0
        let rc = payload.withUnsafeBytes { bytes in
            mosquitto_publish(mosq, &messageID, topic, Int32(bytes.count), bytes.baseAddress, 1, retain)
        }
        afterLibraryCall()
        try MQTTError.check(rc, "publish \(topic)")
        return messageID
    }

    /// The broker socket's descriptor, -1 while there is none (for diagnostics and tests).
    public var socketDescriptor: Int32 { mosq.map { mosquitto_socket($0) } ?? -1 }

    /// Subscribes to `topic` (QoS 1) now if connected, and again after every reconnect.
    public func subscribe(topic: String) throws(MQTTError) {
        guard state != .closed else { throw MQTTError(code: MQTTError.closed, operation: "subscribe \(topic): closed") }
        guard topic.utf8.count <= MQTTClient.maximumTopicBytes else {
            throw MQTTError(code: MQTTError.invalidArgument, operation: "subscribe: topic too long")
        }
        if subscriptions.contains(topic) { return }
        guard subscriptions.count < MQTTClient.maximumSubscriptions else {
            throw MQTTError(code: MQTTError.invalidArgument, operation: "subscribe \(topic): too many subscriptions")
        }
        subscriptions.append(topic)
        if state == .connected { try sendSubscribe(topic) }
    }

    /// Disconnects and frees the client; idempotent. No callback runs afterwards.
    public func close() {
        guard state != .closed else { return }
        state = .closed
        pendingEvents.removeAll()
        // The poll must stop watching the descriptor before libmosquitto closes it.
        closePoll()
        housekeeping.close()
        reconnectTimer.close()
        if let mosq {
            mosquitto_disconnect(mosq)
            mosquitto_destroy(mosq)
            self.mosq = nil
        }
    }

    // MARK: - Connection lifecycle

    private func attemptConnect() {
        guard let mosq, state != .closed else { return }
        closePoll()  // connect_async closes the previous socket
        state = .connecting
        attemptStartedAt = loop.now
        pendingLoss = nil
        libraryErrors = []
        let rc = mosquitto_connect_async(mosq, configuration.host, configuration.port, configuration.keepaliveSeconds)
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            connectionEnded(MQTTError(code: rc, operation: "connect \(configuration.host):\(configuration.port)"))
            return
        }
        afterLibraryCall()
    }

    /// Called after every libmosquitto call: acts on what its callbacks reported, re-aims the
    /// poll at the current socket and wanted events, then runs the queued user callbacks.
    private func afterLibraryCall() {
        if state == .connecting || state == .connected {
            if let loss = pendingLoss {
                pendingLoss = nil
                connectionEnded(loss)
            } else if let mosq, mosquitto_socket(mosq) < 0 {
                connectionEnded(MQTTError(code: MQTTError.connectionLost, operation: "socket closed"))
            } else {
                watchSocket()
            }
        }
        dispatchEvents()
    }

    private func connectionEnded(_ reported: MQTTError) {
        guard state == .connecting || state == .connected else { return }
        closePoll()
        let error = libraryErrors.isEmpty ? reported : reported.explained(by: libraryErrors.joined(separator: "; "))
        libraryErrors = []
        lastError = error
        pendingEvents.append(state == .connected ? .disconnected(error) : .connectFailed(error))
        state = .waitingToReconnect
        reconnectTimer.start(afterMicroseconds: backoff.nextDelay()) { [weak self] in
            self?.attemptConnect()
        }
    }

    private func runHousekeeping() {
        guard let mosq, state == .connecting || state == .connected else { return }
        if state == .connecting, loop.now &- attemptStartedAt > configuration.connectTimeoutMicroseconds {
            connectionEnded(MQTTError(code: MOSQ_ERR_TIMEOUT.rawValue, operation: "connect \(configuration.host):\(configuration.port)"))
            dispatchEvents()
            return
        }
        let rc = mosquitto_loop_misc(mosq)
        if rc != MOSQ_ERR_SUCCESS.rawValue && pendingLoss == nil {
            pendingLoss = MQTTError(code: rc, operation: "loop_misc")
        }
        afterLibraryCall()
    }

    // MARK: - Socket readiness

    private func watchSocket() {
        guard let mosq else { return }
        let fd = mosquitto_socket(mosq)
        if let poll, poll.fd != fd { closePoll() }
        if poll == nil {
            do {
                poll = try Poll(loop: loop, fd: fd)
            } catch {
                connectionEnded(MQTTError(code: MOSQ_ERR_ERRNO.rawValue, operation: "poll socket: \(error)"))
                return
            }
            pollEvents = []
        }
        let wanted: Poll.Events = mosquitto_want_write(mosq) ? [.readable, .writable] : [.readable]
        guard wanted != pollEvents, let poll else { return }
        do {
            try poll.start(wanted) { [weak self] events, error in self?.socketReady(events, error) }
            pollEvents = wanted
        } catch {
            connectionEnded(MQTTError(code: MOSQ_ERR_ERRNO.rawValue, operation: "poll socket: \(error)"))
        }
    }

    private func socketReady(_ events: Poll.Events, _ error: UVError?) {
        guard let mosq, state == .connecting || state == .connected else { return }
        if let error {
            connectionEnded(MQTTError(code: MQTTError.connectionLost, operation: "poll: \(error)"))
            dispatchEvents()
            return
        }
        if !events.isDisjoint(with: [.readable, .disconnect]) {
            let rc = mosquitto_loop_read(mosq, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue && pendingLoss == nil {
                pendingLoss = MQTTError(code: rc, operation: "loop_read")
            }
        }
        if pendingLoss == nil, events.contains(.writable), mosquitto_socket(mosq) >= 0 {
            let rc = mosquitto_loop_write(mosq, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue && pendingLoss == nil {
                pendingLoss = MQTTError(code: rc, operation: "loop_write")
            }
        }
        afterLibraryCall()
    }

    private func closePoll() {
        poll?.close()
        poll = nil
        pollEvents = []
    }

    // MARK: - libmosquitto callbacks (run inside library calls; they only record)

    private static func from(_ object: UnsafeMutableRawPointer?) -> MQTTClient? {
        guard let object else { return nil }
        return Unmanaged<MQTTClient>.fromOpaque(object).takeUnretainedValue()
    }

    private func libraryConnected(_ rc: Int32) {
        guard state == .connecting else { return }
        guard rc == 0 else {
            pendingLoss = MQTTError(code: MOSQ_ERR_CONN_REFUSED.rawValue, operation: "CONNACK \(rc): \(MQTTClient.connackText(rc))")
            return
        }
        state = .connected
        connectCount += 1
        backoff.reset()
        lastError = nil
        for topic in subscriptions {
            do { try sendSubscribe(topic) } catch { pendingLoss = error; return }
        }
        pendingEvents.append(.connected)
    }

    private func libraryLogged(_ text: String) {
        guard libraryErrors.count < MQTTClient.maximumLibraryErrors else { return }
        var line = text
        if line.utf8.count > MQTTClient.maximumLibraryErrorBytes { line = String(line.prefix(MQTTClient.maximumLibraryErrorBytes)) + "..." }
        // OpenSSL's own line for a refused certificate says only that; the chain's verdict says why.
        if line.contains("certificate verify failed"), let mosq, let ssl = mosquitto_ssl_get(mosq) {
            let verdict = SSL_get_verify_result(OpaquePointer(ssl))
            if verdict != Int(X509_V_OK), let reason = X509_verify_cert_error_string(verdict) { line += " (\(String(cString: reason)))" }
        }
        libraryErrors.append(line)
    }

    private func libraryDisconnected(_ rc: Int32) {
        guard state == .connecting || state == .connected, pendingLoss == nil else { return }
        pendingLoss = MQTTError(code: rc == 0 ? MQTTError.connectionLost : rc, operation: "disconnected")
    }

    private func libraryReceived(_ message: mosquitto_message) {
        guard state == .connected, let topic = message.topic else { return }
        let count = Int(max(0, message.payloadlen))
        let payload: [UInt8] = if count > 0, let bytes = message.payload {
            Array(UnsafeRawBufferPointer(start: bytes, count: count))
        } else {
            []
        }
        pendingEvents.append(.message(Message(topic: String(cString: topic), payload: payload)))
    }

    private func sendSubscribe(_ topic: String) throws(MQTTError) {
        guard let mosq else { throw MQTTError(code: MQTTError.closed, operation: "subscribe \(topic): closed") }
        try MQTTError.check(mosquitto_subscribe(mosq, nil, topic, 1), "subscribe \(topic)")
        if poll != nil { watchSocket() }
    }

    private static func connackText(_ rc: Int32) -> String {
        guard let text = mosquitto_connack_string(rc) else { return "refused" }
        return String(cString: text)
    }

    private func dispatchEvents() {
        while !pendingEvents.isEmpty, state != .closed {
            switch pendingEvents.removeFirst() {
            case .connected: onConnect?()
            case .connectFailed(let error): onConnectFailed?(error)
            case .disconnected(let error): onDisconnect?(error)
            case .message(let message): onMessage?(message)
            }
        }
    }
}
