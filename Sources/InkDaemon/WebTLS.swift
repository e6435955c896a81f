import CSSL

/// A TLS failure: OpenSSL's own words for it.
struct TLSError: Error, CustomStringConvertible {
    let description: String

    init(_ what: String) {
        var text = what
        var first = true
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let utf8 = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            text += (first ? ": " : "; ") + String(decoding: utf8, as: UTF8.self)
            first = false
        }
        description = text
    }
}

/// The web listener's TLS configuration (OpenSSL's `SSL_CTX`): one certificate chain and key,
/// TLS 1.2 and 1.3 only. Shared by every connection.
final class TLSServerContext {
    let context: OpaquePointer

    init(certificateFile: String, keyFile: String) throws(TLSError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError("SSL_CTX_new") }
        self.context = context
        _ = inkwire_ssl_set_min_tls12(context)
        _ = inkwire_ssl_set_mode_partial_write(context)
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            throw TLSError("certificate \(certificateFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1 else { throw TLSError("key \(keyFile)") }
        guard SSL_CTX_check_private_key(context) == 1 else { throw TLSError("the key \(keyFile) does not match \(certificateFile)") }
    }

    deinit { SSL_CTX_free(context) }
}

/// One server-side TLS connection through memory BIOs, so it rides the daemon's libuv loop:
/// ciphertext from the socket goes in with `handleCiphertext`, plaintext comes out of
/// `pollPlaintext`; plaintext to send goes in with `write`, ciphertext for the socket comes out
/// of `pollCiphertext`. OpenSSL never touches a socket.
final class TLSServerSession {
    private let ssl: OpaquePointer
    /// The socket side: what arrived (OpenSSL reads it) and what to send (OpenSSL writes it).
    private let incoming: OpaquePointer
    private let outgoing: OpaquePointer
    private var plaintext: [UInt8] = []
    private(set) var isHandshakeComplete = false
    /// The peer sent close_notify.
    private(set) var peerClosed = false

    /// Most plaintext read per `handleCiphertext` before the caller must drain it (a TLS
    /// record holds at most 16 KiB, and a read of the socket at most 64 KiB of records).
    static let readChunk = 16 * 1024

    init(context: TLSServerContext) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.context) else { throw TLSError("SSL_new") }
        guard let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError("BIO_new")
        }
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        // The SSL object owns both BIOs from here on (freed by SSL_free).
        SSL_set_bio(ssl, incoming, outgoing)
        SSL_set_accept_state(ssl)
    }

    deinit { SSL_free(ssl) }

    /// Takes bytes read from the socket and runs the handshake or decrypts what they complete.
    /// Throws on a fatal TLS error (the connection must close; `pollCiphertext` may hold an alert).
    func handleCiphertext(_ bytes: UnsafeRawBufferPointer) throws(TLSError) {
        ERR_clear_error()
        var offset = 0
        while offset < bytes.count {
            let n = BIO_write(incoming, bytes.baseAddress! + offset, Int32(bytes.count - offset))
            guard n > 0 else { throw TLSError("BIO_write") }
            offset += Int(n)
        }
        if !isHandshakeComplete {
            let r = SSL_do_handshake(ssl)
            if r == 1 {
                isHandshakeComplete = true
            } else {
                try check(r, "handshake")
                return
            }
        }
        var chunk = [UInt8](repeating: 0, count: TLSServerSession.readChunk)
        while true {
            let n = chunk.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 {
                plaintext.append(contentsOf: chunk[..<Int(n)])
                continue
            }
            try check(n, "read")
            return
        }
    }

    /// Decrypted bytes received so far (taken).
    func pollPlaintext() -> [UInt8]? {
        guard !plaintext.isEmpty else { return nil }
        defer { plaintext = [] }
        return plaintext
    }

    /// Encrypts `bytes` to send (after the handshake).
    func write(_ bytes: [UInt8]) throws(TLSError) {
        ERR_clear_error()
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            guard n > 0 else {
                try check(n, "write")
                throw TLSError("write made no progress")
            }
            offset += Int(n)
        }
    }

    /// Sends close_notify (the caller then writes `pollCiphertext` and shuts the socket down).
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
    }

    /// Ciphertext for the socket (handshake records, encrypted data, alerts), nil when none.
    func pollCiphertext() -> [UInt8]? {
        let pending = inkwire_bio_pending(outgoing)
        guard pending > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(pending))
        let n = out.withUnsafeMutableBytes { BIO_read(outgoing, $0.baseAddress, Int32($0.count)) }
        guard n > 0 else { return nil }
        return Array(out[..<Int(n)])
    }

    /// The negotiated version and cipher, for the log.
    var description: String {
        let version = SSL_get_version(ssl).map { String(cString: $0) } ?? "?"
        let cipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } ?? "?"
        return "\(version) \(cipher)"
    }

    private func check(_ result: Int32, _ operation: String) throws(TLSError) {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return
        case SSL_ERROR_ZERO_RETURN:
            peerClosed = true
            return
        default:
            throw TLSError("TLS \(operation) failed")
        }
    }
}
