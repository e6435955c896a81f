// The hook for `inkwire codec`'s binary form: a file of compact binary batches.
// The binary codec fills these two functions; nothing else in the CLI needs to change.
import InkCodec

/// `batches` (one author's, cut into 60 ms batches) as a binary file.
func encodeBinaryStream(_ batches: [Batch]) throws -> [UInt8] {
    throw CodecCommandError(description: "the binary form is not available yet")
}

/// The batches of a binary file, in order.
func decodeBinaryStream(_ bytes: [UInt8]) throws -> [Batch] {
    throw CodecCommandError(description: "the binary form is not available yet")
}
