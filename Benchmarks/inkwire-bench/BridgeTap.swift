import InkBenchSupport
import InkRelay
import MQTTChaos

/// Splits the broker hop of `inkwire-bench bridge --tap` into legs, from what the MQTT proxy
/// sees: *home* (drawer hands the batch to its socket -> the home's `record` publish reaches the
/// proxy), *broker* (that publish -> each copy leaving the broker towards a follower) and
/// *follower* (the first copy leaving the broker, live or in a catch-up response -> delivery at
/// a remote watcher).
final class BridgeTap {
    /// Per room, per roomSeq - 1: when the home's record reached the proxy, and when the first
    /// copy came back from the broker (0: not yet).
    private var homeOut: [[UInt64]]
    private var brokerOut: [[UInt64]]
    private(set) var homeLeg = FanoutHistogram()
    private(set) var brokerLeg = FanoutHistogram()
    private(set) var followerLeg = FanoutHistogram()
    /// Records the tap could not place (unknown room, or roomSeq beyond the bound).
    private(set) var unplaced = 0
    /// Largest roomSeq tracked per room.
    static let maximumRoomSeq = 1 << 20

    private let rooms: Int
    private let roomPrefix: String
    /// When each batch was handed over (room, roomSeq) and whether it is in the measured window.
    var handedAt: (Int, UInt64) -> UInt64? = { _, _ in nil }
    var inWindow: (UInt64) -> Bool = { _ in false }

    init(rooms: Int, roomPrefix: String) {
        self.rooms = rooms
        self.roomPrefix = roomPrefix
        homeOut = Array(repeating: [], count: rooms)
        brokerOut = Array(repeating: [], count: rooms)
    }

    func attach(to proxy: MQTTChaosProxy) {
        proxy.onPublishArrival = { [unowned self] side, packet, now in self.observe(side, packet, now) }
    }

    private func observe(_ side: MQTTChaosSession.Side, _ packet: MQTTPacket, _ now: UInt64) {
        guard let payload = packet.publishPayload(), let message = try? BridgeWire.decode(Array(payload)) else { return }
        switch message {
        case .record(let record):
            observe(record, side: side, now: now)
        case .response(_, let records) where side == .broker:
            // A follower that saw a gap (a record the chaos proxy delayed, or published before it
            // subscribed) catches up from the home's response: that copy leaves the broker too.
            for record in records {
                guard let (room, index) = place(record) else { continue }
                if slot(&brokerOut, room, index) == 0 { brokerOut[room][index] = now }
            }
        default:
            return
        }
    }

    private func place(_ record: RelayRecord) -> (room: Int, index: Int)? {
        guard record.room.hasPrefix(roomPrefix), let room = Int(record.room.dropFirst(roomPrefix.count)), room >= 0, room < rooms,
              record.roomSeq >= 1, record.roomSeq <= UInt64(BridgeTap.maximumRoomSeq) else {
            unplaced += 1
            return nil
        }
        return (room, Int(record.roomSeq) - 1)
    }

    private func slot(_ table: inout [[UInt64]], _ room: Int, _ index: Int) -> UInt64 {
        while table[room].count <= index { table[room].append(0) }
        return table[room][index]
    }

    private func observe(_ record: RelayRecord, side: MQTTChaosSession.Side, now: UInt64) {
        guard let (room, index) = place(record) else { return }
        switch side {
        case .client:  // a daemon (the home) publishing the record
            guard slot(&homeOut, room, index) == 0 else { return }
            homeOut[room][index] = now
            if let handed = handedAt(room, record.roomSeq), inWindow(handed) { homeLeg.record(now >= handed ? now - handed : 0) }
        case .broker:  // the broker delivering it to a follower
            let published = slot(&homeOut, room, index)
            if slot(&brokerOut, room, index) == 0 { brokerOut[room][index] = now }
            if published > 0, let handed = handedAt(room, record.roomSeq), inWindow(handed) {
                brokerLeg.record(now >= published ? now - published : 0)
            }
        }
    }

    /// A remote watcher got (room, roomSeq) at `now`: the follower leg, from the first copy out
    /// of the broker.
    func remoteDelivery(room: Int, roomSeq: UInt64, at now: UInt64) {
        let index = Int(roomSeq) - 1
        guard room < rooms, index < brokerOut[room].count, brokerOut[room][index] > 0 else { return }
        let out = brokerOut[room][index]
        followerLeg.record(now >= out ? now - out : 0)
    }
}
