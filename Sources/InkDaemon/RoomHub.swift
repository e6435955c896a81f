import InkCodec
import InkStore

/// A member of a room that the hub delivers other members' batches to.
protocol RoomMember: AnyObject {
    /// Another author's batch, already applied to `board`.
    func deliver(_ batch: Batch, board: Board)
}

/// Why a member could not join.
enum RoomJoinError: Error, Equatable, CustomStringConvertible {
    case tooManyRooms(limit: Int)
    case roomFull(limit: Int)
    var description: String {
        switch self {
        case .tooManyRooms(let limit): "the daemon already holds \(limit) rooms"
        case .roomFull(let limit): "the room already has \(limit) members"
        }
    }
}

/// The daemon's rooms: each one's board (a fold of its log), its members in join order, and its
/// durable log in the store. Every accepted batch is appended to the store (self-contained
/// binary encoding), applied to the board, then handed to every other member in join order.
///
/// This is the daemon-side room keeping the legacy listeners need; native sessions are served by
/// InkRelay, which owns permissions, acknowledgements and history sync.
final class RoomHub {
    final class Room {
        let name: String
        var board = Board()
        var members: [(author: AuthorID, member: RoomMember)] = []
        var nextAuthor: UInt32 = 1
        init(name: String) { self.name = name }
    }

    private let store: RoomLogStore
    private let logger: Logger
    private let metrics: DaemonMetrics
    var limits: DaemonLimits
    /// Rooms by name; `roomNames` keeps a deterministic order for status and metrics.
    private var rooms: [String: Room] = [:]
    private(set) var roomNames: [String] = []

    init(store: RoomLogStore, logger: Logger, metrics: DaemonMetrics, limits: DaemonLimits) {
        self.store = store
        self.logger = logger
        self.metrics = metrics
        self.limits = limits
    }

    var roomCount: Int { rooms.count }
    var memberCount: Int { rooms.values.reduce(0) { $0 + $1.members.count } }

    func board(of name: String) -> Board? { rooms[name]?.board }

    /// Folds every stored room back into its board (on start).
    func reopen() {
        for info in store.rooms() {
            let room = Room(name: info.name)
            var after = info.firstRoomSeq > 0 ? info.firstRoomSeq - 1 : 0
            var batches = 0
            while true {
                let page: TailPage
                do {
                    page = try store.readTail(room: info.name, after: after, maxRecords: 4096, maxBytes: 4 << 20)
                } catch {
                    logger.warning("room history unreadable", ["room": info.name, "error": error])
                    metrics.errors(kind: "store_read").increment()
                    break
                }
                for record in page.records {
                    var state = BinaryCodecState()
                    guard let batch = try? BinaryBatchCodec.decode(record.payload, state: &state) else {
                        metrics.errors(kind: "store_decode").increment()
                        continue
                    }
                    room.board.apply(batch)
                    room.nextAuthor = max(room.nextAuthor, batch.author.rawValue &+ 1)
                    batches += 1
                }
                after = page.nextAfter
                if page.reachedEnd || page.records.isEmpty { break }
            }
            insert(room)
            logger.info("room reopened", ["room": info.name, "batches": batches, "room_seq": info.lastRoomSeq, "strokes": room.board.strokeCount])
        }
    }

    private func insert(_ room: Room) {
        rooms[room.name] = room
        let index = roomNames.firstIndex { $0 > room.name } ?? roomNames.count
        roomNames.insert(room.name, at: index)
    }

    /// Adds `member` to `name` (creating the room) as a new author; returns it and the board.
    func join(_ name: String, member: RoomMember) throws(RoomJoinError) -> (AuthorID, Board) {
        let room: Room
        if let existing = rooms[name] {
            room = existing
        } else {
            guard rooms.count < limits.maxRooms else { throw .tooManyRooms(limit: limits.maxRooms) }
            room = Room(name: name)
            insert(room)
        }
        guard room.members.count < limits.maxMembersPerRoom else { throw .roomFull(limit: limits.maxMembersPerRoom) }
        let author = AuthorID(room.nextAuthor)
        room.nextAuthor &+= 1
        room.members.append((author, member))
        return (author, room.board)
    }

    func leave(_ name: String, author: AuthorID) {
        rooms[name]?.members.removeAll { $0.author == author }
    }

    /// Appends, applies and fans out one batch of `author`. The live relay goes on when the
    /// store refuses (full disk, backlog): the failure is logged and counted.
    func submit(_ batch: Batch, room name: String, user: String, origin: UInt64, originSeq: UInt64, nowMs: UInt64) {
        guard let room = rooms[name], !batch.commands.isEmpty else { return }
        var state = BinaryCodecState()
        do {
            let payload = try BinaryBatchCodec.encode(batch, state: &state, selfContained: true)
            _ = try store.append(NewBatch(room: name, origin: origin, originSeq: originSeq, author: user, receivedAtMs: nowMs, payload: payload))
        } catch let error as StoreError {
            metrics.errors(kind: error.isDiskFull ? "disk_full" : "store_append").increment()
            logger.error("batch not stored", ["room": name, "user": user, "error": error])
        } catch {
            metrics.errors(kind: "encode").increment()
            logger.error("batch not encodable", ["room": name, "user": user, "error": "\(error)"])
        }
        room.board.apply(batch)
        for (author, member) in room.members where author != batch.author {
            member.deliver(batch, board: room.board)
        }
    }
}
