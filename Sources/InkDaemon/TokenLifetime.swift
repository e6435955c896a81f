/// `inkwire token --ttl`: a token's lifetime from now.
public enum TokenLifetime {
    /// Longest lifetime minted: a token that outlives a school year is a password.
    public static let maximumDays: UInt64 = 366

    /// `90`, `90s`, `15m`, `2h`, `7d` (seconds without a unit), as seconds; 1 s to `maximumDays`.
    public static func parse(_ text: String) -> UInt64? {
        let units: [Character: UInt64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var digits = Substring(text)
        var unit: UInt64 = 1
        if let last = digits.last, let scale = units[last] {
            unit = scale
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.count <= 12, digits.allSatisfy({ ("0"..."9").contains($0) }), let value = UInt64(digits),
              value >= 1, value <= maximumDays * 86_400 / unit else { return nil }
        return value * unit
    }
}
