import CMosquitto

/// A failed libmosquitto call: the MQTT error code, libmosquitto's text for it
/// (`mosquitto_strerror`) and the operation that failed (`publish inkwire/room/7/batches`).
public struct MQTTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The libmosquitto result code (`MOSQ_ERR_*`).
    public let code: Int32
    /// `mosquitto_strerror(code)`, e.g. `The client is not currently connected.`
    public let message: String
    /// What was being done.
    public let operation: String
    /// What libmosquitto logged about it (OpenSSL's reasons for a failed TLS handshake), if anything.
    public private(set) var detail: String?

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
        if let text = mosquitto_strerror(code) {
            self.message = String(cString: text)
        } else {
            self.message = "unknown mosquitto error \(code)"
        }
    }

    public var description: String { "\(operation): \(message) (mosquitto \(code))" + (detail.map { ": " + $0 } ?? "") }

    /// The same error with libmosquitto's explanation.
    func explained(by detail: String) -> MQTTError {
        var copy = self
        copy.detail = detail
        return copy
    }

    /// Throws for any result other than `MOSQ_ERR_SUCCESS`.
    static func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(MQTTError) {
        if result != MOSQ_ERR_SUCCESS.rawValue { throw MQTTError(code: result, operation: operation()) }
    }

    // Codes callers commonly branch on.
    public static let notConnected = MOSQ_ERR_NO_CONN.rawValue
    public static let connectionLost = MOSQ_ERR_CONN_LOST.rawValue
    public static let payloadTooLarge = MOSQ_ERR_PAYLOAD_SIZE.rawValue
    public static let invalidArgument = MOSQ_ERR_INVAL.rawValue
    /// The client was closed.
    public static let closed = MOSQ_ERR_INVAL.rawValue
}
