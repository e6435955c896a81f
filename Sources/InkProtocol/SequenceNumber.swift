/// A 32-bit sequence number that wraps around.
///
/// Every comparison of sequence numbers and of 32-bit wire timestamps goes through
/// `SequenceNumber.distance(from:to:)`, the one wrap-around-safe helper: it is correct as long
/// as the two values are less than 2^31 apart, which the bounded windows guarantee.
public struct SequenceNumber: Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32

    public init(_ rawValue: UInt32) { self.rawValue = rawValue }

    /// Signed distance from `a` to `b` on the 32-bit circle (positive when `b` is after `a`).
    @inlinable
    public static func distance(from a: UInt32, to b: UInt32) -> Int32 {
        Int32(bitPattern: b &- a)
    }

    /// Signed distance from `self` to `other` (positive when `other` is later).
    @inlinable
    public func distance(to other: SequenceNumber) -> Int32 {
        SequenceNumber.distance(from: rawValue, to: other.rawValue)
    }

    /// True when `self` comes strictly before `other`.
    @inlinable
    public func precedes(_ other: SequenceNumber) -> Bool { distance(to: other) > 0 }

    @inlinable
    public func advanced(by n: UInt32) -> SequenceNumber { SequenceNumber(rawValue &+ n) }

    public var description: String { "#\(rawValue)" }
}
