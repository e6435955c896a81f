/// `inkwire token --ttl`: a token's lifetime from now.
public enum TokenLifetime {
    /// Longest lifetime minted: a token that outlives a school year is a password.
    public static let maximumDays: UInt64 = 366

    /// `90`, `90s`, `15m`, `2h`, `7d` (seconds without a unit), as seconds; 1 s to `maximumDays`.
    public static func parse(_ text: String) -> UInt64? {
        guard let seconds = DurationText.seconds(text, atMost: maximumDays * 86_400), seconds >= 1 else { return nil }
        return seconds
    }
}
