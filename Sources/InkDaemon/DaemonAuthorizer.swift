import InkProtocol
import InkRelay

/// The relay's join check: HMAC tokens when `--token-secret-file` is set, open otherwise.
/// Legacy devices carry no token: their joins are made by the daemon for a room the operator
/// bound to a listener, recognised by their producer id.
final class DaemonAuthorizer: JoinAuthorizer {
    /// Nil: open mode. Replaced on SIGHUP.
    var verifier: TokenVerifier?
    private var trustedOrigins: Set<UInt64> = []
    /// Most legacy joins in flight at once (each is trusted only for its own join call).
    static let maximumTrustedOrigins = 65_536

    init(verifier: TokenVerifier?) { self.verifier = verifier }

    /// Lets the next join with `origin` through without a token (a legacy device).
    func trust(_ origin: UInt64) {
        if trustedOrigins.count < DaemonAuthorizer.maximumTrustedOrigins { trustedOrigins.insert(origin) }
    }

    func forget(_ origin: UInt64) { trustedOrigins.remove(origin) }

    func authorize(_ request: JoinRequest, now: Instant) -> JoinAuthorization {
        if trustedOrigins.contains(request.origin) { return .open }
        guard let verifier else { return .open }
        let asked = TokenRole(rawValue: request.role.description) ?? .viewer
        switch verifier.verify(request.token, room: request.room, user: request.user, role: asked, nowSeconds: WallClock.seconds()) {
        case .success(let claims):
            let role: MemberRole = claims.role == .teacher ? .teacher : claims.role == .presenter ? .presenter : .viewer
            return .verified(TokenClaims(room: claims.room, user: claims.user, role: role, expiresAtMs: claims.expiresAt &* 1000))
        case .failure(let refusal):
            let reason: JoinRefusal
            switch refusal {
            case .missing, .malformed, .badSignature: reason = .badToken
            case .expired: reason = .expiredToken
            case .wrongRoom, .wrongUser: reason = .tokenMismatch
            case .roleNotAllowed: reason = .roleNotAllowed
            }
            return .refused(reason, text: refusal.description)
        }
    }
}
