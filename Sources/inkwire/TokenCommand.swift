// `inkwire token`: mints a join token with the daemon's secret (docs/protocol.md 8.3), for a
// school without an app server of its own, for scripts and for trying `--token-secret-file`.
import Foundation
import InkDaemon
import InkProtocol

let tokenUsage = """
    usage: inkwire token --secret-file FILE --room NAME --user NAME --role ROLE (--ttl DURATION | --expires UNIX_SECONDS)
      Prints a join token for the daemon whose --token-secret-file is FILE: USER may join ROOM with ROLE
      (or fewer rights) until it expires. Give it to the device privately: inkwire reads it from
      --token-file FILE or INKWIRE_TOKEN, so it never shows in ps.
      --secret-file FILE    the daemon's token secret (16 to 4096 bytes; trailing newlines ignored)
      --room NAME           the room (1 to \(SessionMessageCodec.maxRoomNameBytes) bytes)
      --user NAME           the user the token is for (1 to \(SessionMessageCodec.maxUserNameBytes) bytes)
      --role ROLE           teacher | presenter | viewer
      --ttl DURATION        valid for 90s, 15m, 2h or 7d from now (at most \(TokenLifetime.maximumDays)d)
      --expires SECONDS     valid until this unix time instead (e.g. to reproduce a token)
    Options take --name value or --name=value. Exits 0 with the token on standard output, 2 on a bad
    argument, 1 when the secret cannot be read.

    """

func runTokenCommand(_ arguments: [String]) -> Int32 {
    func usageError(_ text: String) -> Int32 {
        printError("token", text)
        FileHandle.standardError.write(Data(tokenUsage.utf8))
        return ClientExit.badArguments
    }
    let flags: ParsedFlags
    do {
        flags = try ParsedFlags(arguments, allowed: ["--secret-file", "--room", "--user", "--role", "--ttl", "--expires"])
    } catch {
        return usageError("\(error)")
    }
    let secretPath: String, room: String, user: String
    do {
        secretPath = try flags.required("--secret-file")
        room = try flags.required("--room")
        user = try flags.required("--user")
    } catch {
        return usageError("\(error)")
    }
    for (flag, value, bound) in [("--room", room, SessionMessageCodec.maxRoomNameBytes), ("--user", user, SessionMessageCodec.maxUserNameBytes)] {
        // A newline would split the claims (room, user, role, expiry on four lines).
        guard value.utf8.count <= bound, value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else {
            return usageError("\(flag) must be 1 to \(bound) bytes without control characters")
        }
    }
    guard let roleText = flags.string("--role") else { return usageError("--role is required (teacher, presenter or viewer)") }
    guard let role = TokenRole(rawValue: roleText) else { return usageError("--role must be teacher, presenter or viewer, not '\(roleText)'") }
    let expiresAt: UInt64
    switch (flags.string("--ttl"), flags.string("--expires")) {
    case (let ttl?, nil):
        guard let seconds = TokenLifetime.parse(ttl) else {
            return usageError("--ttl '\(ttl)': expected a duration like 90s, 15m, 2h or 7d, from 1s to \(TokenLifetime.maximumDays)d")
        }
        expiresAt = UInt64(Date().timeIntervalSince1970) + seconds
    case (nil, let text?):
        // Ten digits reach the year 2286; the verifier reads at most 20.
        guard !text.isEmpty, text.count <= 12, text.allSatisfy({ ("0"..."9").contains($0) }), let value = UInt64(text), value >= 1 else {
            return usageError("--expires '\(text)': expected unix seconds (a whole number, e.g. 1900000000)")
        }
        expiresAt = value
    case (nil, nil): return usageError("--ttl DURATION or --expires UNIX_SECONDS is required")
    case (_?, _?): return usageError("--ttl and --expires exclude each other")
    }
    guard let bytes = FileSystem.read(secretPath, limit: TokenVerifier.maximumSecretBytes + 2) else {
        printError("token", "--secret-file \(secretPath): cannot read the file (or it is larger than \(TokenVerifier.maximumSecretBytes) bytes)")
        return ClientExit.failure
    }
    let minter: TokenVerifier
    do { minter = try TokenVerifier(fileContents: bytes, path: secretPath, flag: "--secret-file") } catch {
        printError("token", "\(error)")
        return ClientExit.failure
    }
    print(minter.mint(JoinClaims(room: room, user: user, role: role, expiresAt: expiresAt)))
    return ClientExit.ok
}
