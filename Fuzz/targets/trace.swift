// Trace files: parsing never traps; a parsed trace prints to text that parses to the same lines.

@_cdecl("LLVMFuzzerTestOneInput")
public func traceFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let lines = try? Trace.parse(bytes) else { return 0 }
    let printed = Trace.format(lines)
    guard let again = try? Trace.parse(printed), again == lines else { fatalError("trace did not round trip") }
    return 0
}
