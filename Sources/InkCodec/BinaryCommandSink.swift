// Where the binary decoder puts the commands it decodes: the caller's array, or the caller's
// buffer. The decoder is generic over it and specialised for each, so the buffer's path has no
// array append (a uniqueness check, a call that spills the decoder's registers) per command.

protocol BinaryCommandSink {
    /// Puts the next command; false when there is no room for it. (Not a throwing requirement:
    /// a typed-throws witness stayed an indirect call in the specialised decoder.)
    mutating func put(_ command: TimedCommand) -> Bool
}

extension Array: BinaryCommandSink where Element == TimedCommand {
    @inline(__always)
    mutating func put(_ command: TimedCommand) -> Bool {
        append(command)
        return true
    }
}

/// The uninitialised part of a caller's command buffer, filled from the front.
struct BinaryCommandCursor: BinaryCommandSink {
    private(set) var next: UnsafeMutablePointer<TimedCommand>
    let end: UnsafeMutablePointer<TimedCommand>

    init(_ buffer: UnsafeMutableBufferPointer<TimedCommand>) {
        next = buffer.baseAddress ?? UnsafeMutablePointer(bitPattern: MemoryLayout<TimedCommand>.alignment)!
        end = next + buffer.count
    }

    @inline(__always)
    mutating func put(_ command: TimedCommand) -> Bool {
        guard next != end else { return false }
        next.initialize(to: command)
        next += 1
        return true
    }
}
