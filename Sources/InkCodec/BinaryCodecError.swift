// Typed errors of the compact binary codec. Hostile input gives one of these, never a trap.

public enum BinaryCodecError: Error, Hashable, Sendable {
    /// The input is empty, or longer than `BinaryBatchCodec.maxBatchBytes`.
    case badLength(Int)
    /// The first bytes hold a coder state no encoder writes.
    case badState
    /// A header symbol this version does not define (a newer codec version).
    case unsupportedHeader(Int)
    /// The batch continues a context the state does not have (no previous author).
    case missingContext
    /// A command symbol this version does not define.
    case reservedKind(Int)
    /// A time symbol this version does not define, or a time that cannot be represented.
    case badTime
    /// More commands than `Batch.maxCommands`, or than the caller's command buffer holds.
    case tooManyCommands
    /// An opaque payload longer than `BinaryBatchCodec.maxOpaqueBytes`, or longer than the input.
    case payloadTooLarge(UInt64)
    /// A decoded coordinate outside Int32.
    case coordinateOutOfRange
    /// A field with a value its type does not allow (phase 0, pen colour 7, id above UInt32...).
    case badField
    /// Bytes left over, or the coder did not end where the encoder began (corrupt or truncated).
    case corrupt
    /// The encoded batch would exceed `BinaryBatchCodec.maxBatchBytes` (encoder side).
    case batchTooLarge
}
