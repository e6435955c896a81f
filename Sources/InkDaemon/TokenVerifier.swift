import CCrypto

/// The role a join token grants. A token lets its holder join with this role or one with fewer
/// rights (a teacher token may join as a viewer).
public enum TokenRole: String, Sendable, CaseIterable, Comparable {
    case teacher, presenter, viewer

    private var rank: Int { self == .teacher ? 0 : self == .presenter ? 1 : 2 }
    /// `teacher < presenter < viewer`: fewer rights compare greater.
    public static func < (a: TokenRole, b: TokenRole) -> Bool { a.rank < b.rank }
}

/// What a valid token says (docs/protocol.md, "Join tokens").
public struct JoinClaims: Sendable, Equatable {
    public var room: String
    public var user: String
    public var role: TokenRole
    /// Unix seconds (UTC) from which the token is refused.
    public var expiresAt: UInt64

    public init(room: String, user: String, role: TokenRole, expiresAt: UInt64) {
        self.room = room
        self.user = user
        self.role = role
        self.expiresAt = expiresAt
    }
}

/// Why a join token was refused; `description` is the text sent to the device.
public enum TokenRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    case missing
    case malformed(String)
    case badSignature
    case expired(at: UInt64)
    case wrongRoom(token: String)
    case wrongUser(token: String)
    case roleNotAllowed(token: TokenRole, asked: TokenRole)

    public var description: String {
        switch self {
        case .missing: "a join token is required"
        case .malformed(let why): "malformed token: \(why)"
        case .badSignature: "token signature does not match"
        case .expired(let at): "token expired at \(at) (unix seconds)"
        case .wrongRoom(let room): "token is for room '\(room)'"
        case .wrongUser(let user): "token is for user '\(user)'"
        case .roleNotAllowed(let granted, let asked): "token grants \(granted.rawValue), not \(asked.rawValue)"
        }
    }

    /// A short name for metrics labels and logs.
    public var kind: String {
        switch self {
        case .missing: "missing"
        case .malformed: "malformed"
        case .badSignature: "bad_signature"
        case .expired: "expired"
        case .wrongRoom, .wrongUser: "mismatch"
        case .roleNotAllowed: "role"
        }
    }
}

/// Checks join tokens signed with HMAC-SHA256 (OpenSSL libcrypto) by the school's app server.
///
/// Token text: `iw1.` + base64url(claims) + `.` + base64url(HMAC-SHA256(secret, "iw1." +
/// base64url(claims))), no padding; claims are `room \n user \n role \n expiry` in UTF-8, expiry
/// in unix seconds. The MAC is compared in constant time (CRYPTO_memcmp).
public struct TokenVerifier: Sendable, Equatable {
    /// Shortest secret accepted (128 bits).
    public static let minimumSecretBytes = 16
    /// Longest secret file read.
    public static let maximumSecretBytes = 4096
    /// Longest token accepted (room and user names are bounded well below this).
    public static let maximumTokenBytes = 1024
    static let prefix = "iw1."
    static let macBytes = 32

    private let secret: [UInt8]

    /// Nil when the secret is shorter than `minimumSecretBytes` or longer than the maximum.
    public init?(secret: [UInt8]) {
        guard secret.count >= TokenVerifier.minimumSecretBytes, secret.count <= TokenVerifier.maximumSecretBytes else { return nil }
        self.secret = secret
    }

    /// The secret from a file's bytes: trailing newlines (an editor's) are not part of it.
    /// `flag` names the setting in errors (`inkwire token` reads it as `--secret-file`).
    public init(fileContents: [UInt8], path: String, flag: String = "--token-secret-file") throws(ConfigError) {
        var bytes = fileContents
        while let last = bytes.last, last == 0x0a || last == 0x0d { bytes.removeLast() }
        guard let verifier = TokenVerifier(secret: bytes) else {
            throw ConfigError("\(flag) \(path): the secret must be \(TokenVerifier.minimumSecretBytes) to \(TokenVerifier.maximumSecretBytes) bytes, found \(bytes.count)")
        }
        self = verifier
    }

    /// Signs claims (for tests and the `inkwire` CLI; normally the app server mints).
    public func mint(_ claims: JoinClaims) -> String {
        let body = TokenVerifier.prefix + Base64URL.encode(Array(TokenVerifier.claimsText(claims).utf8))
        return body + "." + Base64URL.encode(mac(Array(body.utf8)))
    }

    /// Checks a token against what the join asks for at `nowSeconds` (unix time).
    public func verify(_ token: [UInt8], room: String, user: String, role: TokenRole, nowSeconds: UInt64) -> Result<JoinClaims, TokenRefusal> {
        if token.isEmpty { return .failure(.missing) }
        guard token.count <= TokenVerifier.maximumTokenBytes else { return .failure(.malformed("longer than \(TokenVerifier.maximumTokenBytes) bytes")) }
        let prefix = Array(TokenVerifier.prefix.utf8)
        guard token.starts(with: prefix) else { return .failure(.malformed("expected the iw1. prefix")) }
        guard let dot = token[prefix.count...].firstIndex(of: UInt8(ascii: ".")) else {
            return .failure(.malformed("expected iw1.CLAIMS.MAC"))
        }
        guard let claimBytes = Base64URL.decode(token[prefix.count..<dot]),
              let given = Base64URL.decode(token[(dot + 1)...]) else {
            return .failure(.malformed("not base64url"))
        }
        let expected = mac(Array(token[..<dot]))
        guard given.count == TokenVerifier.macBytes,
              CRYPTO_memcmp(given, expected, TokenVerifier.macBytes) == 0 else { return .failure(.badSignature) }
        guard let claims = TokenVerifier.parseClaims(claimBytes) else {
            return .failure(.malformed("claims must be room, user, role, expiry on four lines"))
        }
        if nowSeconds >= claims.expiresAt { return .failure(.expired(at: claims.expiresAt)) }
        if claims.room != room { return .failure(.wrongRoom(token: claims.room)) }
        if claims.user != user { return .failure(.wrongUser(token: claims.user)) }
        if role < claims.role { return .failure(.roleNotAllowed(token: claims.role, asked: role)) }
        return .success(claims)
    }

    private func mac(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = secret.withUnsafeBytes { key in
            message.withUnsafeBufferPointer { data in
                HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), data.baseAddress, data.count, &out, &length)
            }
        }
        // HMAC-SHA256 cannot fail with a valid digest; an all-zero MAC would just never match.
        if ok == nil { return [UInt8](repeating: 0, count: TokenVerifier.macBytes) }
        return Array(out.prefix(Int(length)))
    }

    static func claimsText(_ claims: JoinClaims) -> String {
        "\(claims.room)\n\(claims.user)\n\(claims.role.rawValue)\n\(claims.expiresAt)"
    }

    static func parseClaims(_ bytes: [UInt8]) -> JoinClaims? {
        let fields = bytes.split(separator: 0x0a, omittingEmptySubsequences: false)
        guard fields.count == 4,
              let room = String(validating: fields[0], as: UTF8.self), !room.isEmpty,
              let user = String(validating: fields[1], as: UTF8.self), !user.isEmpty,
              let role = TokenRole(rawValue: String(decoding: fields[2], as: UTF8.self)),
              fields[3].count <= 20, let expiry = UInt64(String(decoding: fields[3], as: UTF8.self)) else { return nil }
        return JoinClaims(room: room, user: user, role: role, expiresAt: expiry)
    }
}

/// RFC 4648 section 5 base64url without padding.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let word = b0 << 16 | b1 << 8 | b2
            let produced = min(4, (bytes.count - index) * 8 / 6 + 1)
            for k in 0..<produced { out.append(alphabet[Int(word >> (18 - 6 * UInt32(k)) & 63)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nil on a character outside the alphabet, padding, or an impossible length.
    static func decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return out
    }
}
