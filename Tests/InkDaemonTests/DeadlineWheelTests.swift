import Testing
@testable import InkDaemon

private final class Member: DeadlineWheelMember {
    let name: String
    var wheelMilliseconds: UInt64?
    init(_ name: String) { self.name = name }
}

@Suite struct DeadlineWheelTests {
    private func expire(_ wheel: DeadlineWheel<Member>, _ now: UInt64) -> [String] {
        var due: [Member] = []
        wheel.expire(nowMilliseconds: now, into: &due)
        return due.map(\.name)
    }

    @Test func firesAtItsMillisecondNeverBeforeInDeadlineOrder() {
        let wheel = DeadlineWheel<Member>(nowMilliseconds: 1000)
        let a = Member("a"), b = Member("b"), c = Member("c")
        #expect(wheel.arm(a, milliseconds: 1030))
        #expect(wheel.arm(b, milliseconds: 1010))
        #expect(!wheel.arm(c, milliseconds: 1030))
        #expect(wheel.nextMilliseconds == 1010)
        #expect(expire(wheel, 1009) == [])
        #expect(wheel.nextMilliseconds == 1010)
        #expect(expire(wheel, 1010) == ["b"])
        #expect(b.wheelMilliseconds == nil)
        #expect(wheel.nextMilliseconds == 1030)
        #expect(expire(wheel, 1100) == ["a", "c"])
        #expect(wheel.nextMilliseconds == nil)
        #expect(wheel.entryCount == 0)
    }

    @Test func reArmingLaterOrEarlierOrDisarmingSupersedesTheOldEntry() {
        let wheel = DeadlineWheel<Member>(nowMilliseconds: 0)
        let a = Member("a"), b = Member("b")
        wheel.arm(a, milliseconds: 10)
        wheel.arm(a, milliseconds: 50)   // later: the entry at 10 is left behind
        wheel.arm(b, milliseconds: 40)
        wheel.arm(b, milliseconds: 20)   // earlier
        #expect(wheel.nextMilliseconds == 10)  // may be early, never late
        #expect(expire(wheel, 10) == [])
        #expect(wheel.nextMilliseconds == 20)
        #expect(expire(wheel, 45) == ["b"])
        #expect(wheel.nextMilliseconds == 50)
        wheel.disarm(a)
        #expect(expire(wheel, 60) == [])
        #expect(wheel.nextMilliseconds == nil)
        #expect(wheel.entryCount == 0)
    }

    @Test func aDeadlineBeyondOneLapWaitsForItsLap() {
        let wheel = DeadlineWheel<Member>(nowMilliseconds: 0)
        let far = Member("far"), near = Member("near")
        let lap = UInt64(DeadlineWheelSlots.count)
        wheel.arm(far, milliseconds: 3 * lap + 7)
        wheel.arm(near, milliseconds: 7)
        #expect(expire(wheel, 7) == ["near"])
        #expect(wheel.nextMilliseconds == 3 * lap + 7)
        #expect(expire(wheel, lap + 7) == [])
        #expect(expire(wheel, 3 * lap + 6) == [])
        #expect(expire(wheel, 3 * lap + 7) == ["far"])
    }

    @Test func aPastDeadlineFiresAtTheNextExpiry() {
        let wheel = DeadlineWheel<Member>(nowMilliseconds: 100)
        let a = Member("a")
        #expect(expire(wheel, 200) == [])
        wheel.arm(a, milliseconds: 150)
        #expect(a.wheelMilliseconds == 201)
        #expect(wheel.nextMilliseconds == 201)
        #expect(expire(wheel, 200) == [])
        #expect(expire(wheel, 201) == ["a"])
    }

    @Test func aLongStallExpiresEverythingDueOnce() {
        let wheel = DeadlineWheel<Member>(nowMilliseconds: 0)
        let members = (0..<50).map { Member("m\($0)") }
        for (i, m) in members.enumerated() { wheel.arm(m, milliseconds: UInt64(1 + i * 300)) }
        let due = expire(wheel, 100_000)
        #expect(due.count == 50)
        #expect(Set(due) == Set(members.map(\.name)))
        #expect(wheel.entryCount == 0)
        #expect(expire(wheel, 100_001) == [])
    }
}
