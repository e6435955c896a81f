import CSSL
import Glibc

/// The web listener's certificate: the files `--web-cert-file`/`--web-key-file` name, or one the
/// daemon made for itself on first start (`web-tls.crt`, `web-tls.key` in the data directory:
/// an ECDSA P-256 key, mode 0600, and a self-signed certificate naming this host, its addresses,
/// `localhost` and the loopback addresses). A school trusts the made one by installing it as an
/// authority on its devices and checking its SHA-256 fingerprint, which the log and the status
/// page show (README, "The board in a browser").
struct WebCertificate {
    let certificateFile: String
    let keyFile: String
    /// SHA-256 of the certificate (DER), as `AB:CD:...`, what browsers show.
    let fingerprint: String
    /// Names and addresses the certificate holds (subjectAltName).
    let names: [String]
    /// Made by the daemon (this start or an earlier one), not given.
    let isSelfMade: Bool

    static let madeCertificateName = "web-tls.crt"
    static let madeKeyName = "web-tls.key"
    /// Validity of a made certificate.
    static let madeValidityDays = 3650

    /// The given files, or the made ones (made now when missing). A made certificate is kept
    /// when the host's addresses change (a new one would need every device to trust it again):
    /// the log says which addresses it lacks.
    static func load(certificateFile: String?, keyFile: String?, dataDir: String, wanted: [String], logger: Logger) throws(ConfigError) -> WebCertificate {
        if let certificateFile, let keyFile {
            guard let (fingerprint, names) = inspect(certificateFile) else {
                throw ConfigError("--web-cert-file \(certificateFile): not a PEM certificate")
            }
            return WebCertificate(certificateFile: certificateFile, keyFile: keyFile, fingerprint: fingerprint, names: names, isSelfMade: false)
        }
        let cert = dataDir + "/" + madeCertificateName
        let key = dataDir + "/" + madeKeyName
        if let (fingerprint, names) = inspect(cert), access(key, R_OK) == 0 {
            let missing = wanted.filter { !names.contains($0) }
            if !missing.isEmpty {
                logger.warning("the web certificate does not name every address of this host; browsers reaching it by these will warn "
                    + "(remove it to make a new one, or give --web-cert-file)", ["file": cert, "missing": missing.joined(separator: ",")])
            }
            return WebCertificate(certificateFile: cert, keyFile: key, fingerprint: fingerprint, names: names, isSelfMade: true)
        }
        do {
            try make(certificateFile: cert, keyFile: key, names: wanted)
        } catch {
            throw ConfigError("cannot make the web certificate in \(dataDir): \(error)")
        }
        guard let (fingerprint, names) = inspect(cert) else { throw ConfigError("the made certificate \(cert) does not read back") }
        logger.notice("made a self-signed web certificate", ["file": cert, "sha256": fingerprint, "names": names.joined(separator: ",")])
        return WebCertificate(certificateFile: cert, keyFile: key, fingerprint: fingerprint, names: names, isSelfMade: true)
    }

    /// The names a made certificate should hold: `localhost`, the loopback addresses, the host
    /// name (and `NAME.local`), every address of the host's interfaces, and `listen` hosts.
    static func wantedNames(listening: [String]) -> [String] {
        var names = ["DNS:localhost", "IP:127.0.0.1", "IP:0:0:0:0:0:0:0:1"]
        var buffer = [CChar](repeating: 0, count: 256)
        if gethostname(&buffer, buffer.count - 1) == 0 {
            let host = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !host.isEmpty && host != "localhost" {
                names.append("DNS:\(host)")
                if !host.contains(".") { names.append("DNS:\(host).local") }
            }
        }
        var list: UnsafeMutablePointer<ifaddrs>?
        if getifaddrs(&list) == 0 {
            var next = list
            while let entry = next {
                if let address = entry.pointee.ifa_addr, let text = numericHost(address) { names.append("IP:\(text)") }
                next = entry.pointee.ifa_next
            }
            freeifaddrs(list)
        }
        for host in listening where host != "0.0.0.0" && host != "::" && !host.isEmpty {
            names.append(host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) ? "IP:\(canonicalIP(host))" : "DNS:\(host)")
        }
        var seen = Set<String>()
        return names.map { $0.hasPrefix("IP:") ? "IP:" + canonicalIP(String($0.dropFirst(3))) : $0 }.filter { seen.insert($0).inserted }
    }

    // MARK: OpenSSL

    /// The fingerprint and subjectAltName entries of a PEM certificate file.
    static func inspect(_ path: String) -> (String, [String])? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        guard let x509 = PEM_read_X509(file, nil, nil, nil) else { return nil }
        defer { X509_free(x509) }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(x509, EVP_sha256(), &digest, &length) == 1 else { return nil }
        let fingerprint = digest[..<Int(length)].map { byte in
            let h = String(byte, radix: 16, uppercase: true)
            return h.count == 1 ? "0" + h : h
        }.joined(separator: ":")
        var names: [String] = []
        if let raw = X509_get_ext_d2i(x509, NID_subject_alt_name, nil, nil) {
            let general = OpaquePointer(raw)
            for i in 0..<OPENSSL_sk_num(general) {
                guard let entry = OPENSSL_sk_value(general, i)?.assumingMemoryBound(to: GENERAL_NAME.self) else { continue }
                if entry.pointee.type == GEN_DNS, let ia5 = entry.pointee.d.dNSName, let data = ASN1_STRING_get0_data(ia5) {
                    names.append("DNS:" + String(decoding: UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(ia5))), as: UTF8.self))
                } else if entry.pointee.type == GEN_IPADD, let ip = entry.pointee.d.iPAddress, let data = ASN1_STRING_get0_data(ip) {
                    let bytes = Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(ip))))
                    names.append("IP:" + ipText(bytes))
                }
            }
            GENERAL_NAMES_free(general)
        }
        return (fingerprint, names)
    }

    private struct MakeError: Error, CustomStringConvertible { let description: String }

    /// Makes an ECDSA P-256 key and a self-signed certificate for `names` (subjectAltName
    /// entries, `DNS:...`/`IP:...`). It is its own authority (basicConstraints CA:TRUE), so it
    /// can be installed as one, and serves TLS (extendedKeyUsage serverAuth).
    static func make(certificateFile: String, keyFile: String, names: [String]) throws {
        ERR_clear_error()
        guard let keyContext = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw TLSError("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(keyContext) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(keyContext) == 1, EVP_PKEY_CTX_set_ec_paramgen_curve_nid(keyContext, NID_X9_62_prime256v1) == 1,
              EVP_PKEY_keygen(keyContext, &key) == 1, let key else { throw TLSError("P-256 key generation") }
        defer { EVP_PKEY_free(key) }
        guard let x509 = X509_new() else { throw TLSError("X509_new") }
        defer { X509_free(x509) }
        var serial = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&serial, Int32(serial.count)) == 1 else { throw TLSError("RAND_bytes") }
        serial[0] &= 0x7F
        let number = BN_bin2bn(serial, Int32(serial.count), nil)
        defer { BN_free(number) }
        guard X509_set_version(x509, 2) == 1, BN_to_ASN1_INTEGER(number, X509_get_serialNumber(x509)) != nil,
              X509_gmtime_adj(X509_getm_notBefore(x509), -3600) != nil,
              X509_gmtime_adj(X509_getm_notAfter(x509), Int(madeValidityDays) * 86_400) != nil,
              X509_set_pubkey(x509, key) == 1 else { throw TLSError("certificate fields") }
        let subject = X509_get_subject_name(x509)
        let host = names.first { $0.hasPrefix("DNS:") && $0 != "DNS:localhost" }.map { String($0.dropFirst(4)) } ?? "localhost"
        for (field, value) in [("O", "Inkwire"), ("CN", "inkwired \(String(host.prefix(50)))")] {
            guard X509_NAME_add_entry_by_txt(subject, field, MBSTRING_UTF8, value, -1, -1, 0) == 1 else { throw TLSError("subject \(field)") }
        }
        guard X509_set_issuer_name(x509, subject) == 1 else { throw TLSError("issuer") }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, x509, x509, nil, nil, 0)
        let extensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
            (NID_key_usage, "critical,digitalSignature,keyCertSign"),
            (NID_ext_key_usage, "serverAuth"),
            (NID_subject_key_identifier, "hash"),
            (NID_subject_alt_name, names.joined(separator: ",")),
        ]
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else { throw TLSError("extension \(value)") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw TLSError("extension \(value)") }
        }
        guard X509_sign(x509, key, EVP_sha256()) > 0 else { throw TLSError("X509_sign") }
        // The key first, readable by the daemon's user only.
        let keyTemp = keyFile + ".new"
        let fd = open(keyTemp, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0, let keyOut = fdopen(fd, "w") else { throw MakeError(description: "\(keyTemp): \(String(cString: strerror(errno)))") }
        let wroteKey = PEM_write_PrivateKey(keyOut, key, nil, nil, 0, nil, nil) == 1
        guard fclose(keyOut) == 0, wroteKey else { throw TLSError("writing \(keyTemp)") }
        let certTemp = certificateFile + ".new"
        guard let certOut = fopen(certTemp, "w") else { throw MakeError(description: "\(certTemp): \(String(cString: strerror(errno)))") }
        let wroteCert = PEM_write_X509(certOut, x509) == 1
        guard fclose(certOut) == 0, wroteCert else { throw TLSError("writing \(certTemp)") }
        guard rename(keyTemp, keyFile) == 0, rename(certTemp, certificateFile) == 0 else {
            throw MakeError(description: "rename: \(String(cString: strerror(errno)))")
        }
    }

    private static func numericHost(_ address: UnsafeMutablePointer<sockaddr>) -> String? {
        let family = Int32(address.pointee.sa_family)
        guard family == AF_INET || family == AF_INET6 else { return nil }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let size = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        guard getnameinfo(address, size, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { return nil }
        let text = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // Link-local IPv6 addresses carry a zone (%eth0) no certificate can hold.
        return text.contains("%") ? nil : text
    }

    /// An IP address as OpenSSL prints subjectAltName entries (IPv6 in 8 groups, no `::`).
    static func canonicalIP(_ text: String) -> String {
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return ipText(withUnsafeBytes(of: &v6) { Array($0) }) }
        return text
    }

    private static func ipText(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        guard bytes.count == 16 else { return "?" }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16, uppercase: true) }
            .joined(separator: ":")
    }
}
