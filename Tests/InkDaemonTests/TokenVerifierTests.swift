import Testing
@testable import InkDaemon

@Suite struct TokenVerifierTests {
    let verifier = TokenVerifier(secret: Array("0123456789abcdef-school-secret".utf8))!
    let claims = JoinClaims(room: "maths 4b", user: "alice", role: .presenter, expiresAt: 2_000_000_000)

    @Test func mintedTokenVerifies() {
        let token = Array(verifier.mint(claims).utf8)
        #expect(verifier.verify(token, room: "maths 4b", user: "alice", role: .presenter, nowSeconds: 1_900_000_000) == .success(claims))
        // Fewer rights than granted is fine; more is not.
        #expect(verifier.verify(token, room: "maths 4b", user: "alice", role: .viewer, nowSeconds: 0) == .success(claims))
        #expect(verifier.verify(token, room: "maths 4b", user: "alice", role: .teacher, nowSeconds: 0)
                == .failure(.roleNotAllowed(token: .presenter, asked: .teacher)))
    }

    @Test func knownVector() {
        // HMAC-SHA256 of the claims text with a fixed key: a school's app server must produce
        // exactly these bytes (docs/protocol.md, "Join tokens").
        let fixed = TokenVerifier(secret: Array("0123456789abcdef".utf8))!
        let token = fixed.mint(JoinClaims(room: "r", user: "u", role: .viewer, expiresAt: 1))
        #expect(token.hasPrefix("iw1.cgp1CnZpZXdlcgox."))
        #expect(token.count == "iw1.cgp1CnZpZXdlcgox.".count + 43)
    }

    /// The complete vector of docs/protocol.md 8.3, every step, and the spec shows each one.
    @Test func completeVectorMatchesTheSpec() throws {
        let secret = Array("0123456789abcdef".utf8)
        let claims = JoinClaims(room: "maths", user: "teacher", role: .teacher, expiresAt: 1_900_000_000)
        let claimBytes = Array(TokenVerifier.claimsText(claims).utf8)
        let claimsHex = "6d617468730a746561636865720a746561636865720a31393030303030303030"
        let body = "iw1.bWF0aHMKdGVhY2hlcgp0ZWFjaGVyCjE5MDAwMDAwMDA"
        let macHex = "d9c971415408d989484d78dc38a418c1d5053b0437bea6125e08717615eb127d"
        let token = "iw1.bWF0aHMKdGVhY2hlcgp0ZWFjaGVyCjE5MDAwMDAwMDA.2clxQVQI2YlITXjcOKQYwdUFOwQ3vqYSXghxdhXrEn0"
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined() }
        #expect(hex(claimBytes) == claimsHex && claimBytes.count == 32)
        #expect("iw1." + Base64URL.encode(claimBytes) == body)
        let minter = TokenVerifier(secret: secret)!
        let minted = minter.mint(claims)
        #expect(minted == token)
        let mac = Base64URL.decode(Array(minted.utf8)[(body.utf8.count + 1)...])
        #expect(mac.map(hex) == macHex)
        #expect(minter.verify(Array(token.utf8), room: "maths", user: "teacher", role: .teacher, nowSeconds: 1_899_999_999) == .success(claims))
        #expect(minter.verify(Array(token.utf8), room: "maths", user: "teacher", role: .viewer, nowSeconds: 1_899_999_999) == .success(claims))
        #expect(minter.verify(Array(token.utf8), room: "maths", user: "teacher", role: .teacher, nowSeconds: 1_900_000_000) == .failure(.expired(at: 1_900_000_000)))
        let spec = String(decoding: readFile(DeployTests.packageRoot + "/docs/protocol.md"), as: UTF8.self)
        for line in ["secret `0123456789abcdef`", "`30313233343536373839616263646566`", claimsHex, "`" + body + "`", macHex, "`" + token + "`"] {
            #expect(spec.contains(line), "docs/protocol.md lacks \(line)")
        }
    }

    @Test func refusalsSayWhy() {
        let token = Array(verifier.mint(claims).utf8)
        #expect(verifier.verify(token, room: "maths 4b", user: "alice", role: .presenter, nowSeconds: 2_000_000_000)
                == .failure(.expired(at: 2_000_000_000)))
        #expect(verifier.verify(token, room: "art", user: "alice", role: .presenter, nowSeconds: 0) == .failure(.wrongRoom(token: "maths 4b")))
        #expect(verifier.verify(token, room: "maths 4b", user: "bob", role: .presenter, nowSeconds: 0) == .failure(.wrongUser(token: "alice")))
        let other = TokenVerifier(secret: Array("another-secret-of-16+".utf8))!
        #expect(other.verify(token, room: "maths 4b", user: "alice", role: .presenter, nowSeconds: 0) == .failure(.badSignature))
        var tampered = token
        tampered[6] ^= 1
        #expect(verifier.verify(tampered, room: "maths 4b", user: "alice", role: .presenter, nowSeconds: 0) == .failure(.badSignature))
        #expect(verifier.verify([], room: "r", user: "u", role: .viewer, nowSeconds: 0) == .failure(.missing))
        for garbage in ["iw1.", "iw2.abc.def", "iw1.***.abc", "iw1.abc", String(repeating: "x", count: 2000)] {
            let result = verifier.verify(Array(garbage.utf8), room: "r", user: "u", role: .viewer, nowSeconds: 0)
            guard case .failure(.malformed) = result else {
                Issue.record("\(garbage.prefix(20)): \(result)")
                continue
            }
        }
    }

    @Test func base64urlRoundTrips() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("="))
            #expect(Base64URL.decode(Array(text.utf8)[...]) == bytes)
        }
        #expect(Base64URL.encode(Array("r\nu\nviewer\n1".utf8)) == "cgp1CnZpZXdlcgox")
    }

    @Test func secretFileTrimsNewlinesAndChecksLength() throws {
        _ = try TokenVerifier(fileContents: Array("0123456789abcdef\n".utf8), path: "s")
        #expect(throws: ConfigError.self) { try TokenVerifier(fileContents: Array("0123456789abcde\n".utf8), path: "s") }
    }
}
