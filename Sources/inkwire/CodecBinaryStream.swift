// The binary form of `inkwire codec`: a file of compact binary batches (BinaryBatchStream).
import InkCodec

/// `batches` (one author's, cut into 60 ms batches) as a binary file.
func encodeBinaryStream(_ batches: [Batch]) throws -> [UInt8] {
    try BinaryBatchStream.encode(batches)
}

/// The batches of a binary file, in order.
func decodeBinaryStream(_ bytes: [UInt8]) throws -> [Batch] {
    try BinaryBatchStream.decode(bytes)
}
