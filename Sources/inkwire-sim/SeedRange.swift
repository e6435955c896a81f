/// `A-B` from `--seeds` as a range of seeds (A <= B); a bad value ends the program with usage.
func seedRange(_ value: String) -> ClosedRange<UInt64> {
    let bounds = value.split(separator: "-", maxSplits: 1).compactMap { UInt64($0) }
    guard bounds.count == 2, bounds[0] <= bounds[1] else { usage("bad --seeds \(value)") }
    return bounds[0] ... bounds[1]
}
