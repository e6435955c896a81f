// HYWhiteboard v1.2's receive routine (`HYSocketService onSocket:didReceiveData:originBuff:`),
// written here from its source, defects included. Test fixture: never use it to read a stream.

/// What the app's receive routine hands on.
public enum HYDelivery: Hashable, Sendable {
    /// The bare `27 11`: the app refreshes its heartbeat timestamp.
    case heartbeat
    /// A data frame; the whiteboard screen gets its payload as text (the command is not looked at).
    case data(command: UInt16, payload: [UInt8])
}

/// The app's per-connection reassembly: one buffer (`_receiveDatas`) and one recursive routine
/// called with every read (at most `readBytes`), following the source step by step:
/// - reads of fewer than 2 bytes are kept for later;
/// - a non-recursive call first prepends what was kept;
/// - the kept buffer is emptied, then the first two bytes are read as a command: a heartbeat
///   (10001) is consumed and the rest parsed again by a recursive call;
/// - with more than 6 bytes, the length (bytes 2..<6) decides: exactly the payload: deliver;
///   less: deliver, keep the rest, and parse a copy of what is kept recursively; more: keep all;
/// - with 6 bytes or fewer (a zero-length frame included): keep all.
/// The defect: when the rest after a delivered frame is one byte, it is appended to the kept
/// buffer and the recursive call, seeing one byte, appends it again. From then on the stream
/// is read one byte off and nothing (heartbeats included) is recognised.
public struct HYReceiver: Sendable {
    /// `BUFFER_SIZE` (`DATABUFFER_SIZE + DATALENGTH_SIZE + CMDLENGTH_SIZE`): one read's maximum.
    public static let readBytes = 1024 + 4 + 2
    static let heartbeatCommand: UInt16 = 10001
    static let commandBytes = 2
    static let lengthBytes = 4

    /// `_receiveDatas`.
    public private(set) var kept: [UInt8] = []
    private var out: [HYDelivery] = []

    public init() {}

    /// One read; returns what the routine delivered, in order.
    public mutating func handleRead(_ data: [UInt8]) -> [HYDelivery] {
        out = []
        receive(data, fromSocket: true)
        return out
    }

    private mutating func receive(_ input: [UInt8], fromSocket: Bool) {
        var data = input
        let header = HYReceiver.commandBytes + HYReceiver.lengthBytes
        if data.count >= HYReceiver.commandBytes {
            // The last read left a part, and this is not a recursive call.
            if fromSocket && !kept.isEmpty {
                kept.append(contentsOf: data)
                data = kept
            }
            kept.removeAll()
            let command = UInt16(data[0]) << 8 | UInt16(data[1])
            if command == HYReceiver.heartbeatCommand {
                out.append(.heartbeat)
                if data.count > HYReceiver.commandBytes { receive(Array(data[HYReceiver.commandBytes...]), fromSocket: false) }
                return
            }
            if data.count > header {
                var length: UInt64 = 0
                for i in HYReceiver.commandBytes..<header { length = length << 8 | UInt64(data[i]) }
                let available = UInt64(data.count - header)
                if length == available {
                    out.append(.data(command: command, payload: Array(data[header...])))
                } else if length < available {
                    let end = header + Int(length)
                    out.append(.data(command: command, payload: Array(data[header..<end])))
                    kept.append(contentsOf: data[end...])
                    receive(kept, fromSocket: false)
                } else {
                    kept.append(contentsOf: data)
                }
            } else {
                kept.append(contentsOf: data)
            }
        } else if !data.isEmpty {
            kept.append(contentsOf: data)
        }
    }
}
