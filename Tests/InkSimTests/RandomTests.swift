import Testing
@testable import InkSim

@Test func glibcRandMatchesGlibcForSeedOne() {
    var r = GlibcRandom(seed: 1)
    let first = (0 ..< 5).map { _ in r.next() }
    #expect(first == [1_804_289_383, 846_930_886, 1_681_692_777, 1_714_636_915, 1_957_747_793])
}

@Test func glibcRandSeedZeroActsAsSeedOne() {
    var zero = GlibcRandom(seed: 0)
    var one = GlibcRandom(seed: 1)
    #expect((0 ..< 100).map { _ in zero.next() } == (0 ..< 100).map { _ in one.next() })
}

@Test func simRandomIsDeterministicAndSeedSensitive() {
    var a = SimRandom(seed: 42)
    var b = SimRandom(seed: 42)
    var c = SimRandom(seed: 43)
    let xs = (0 ..< 8).map { _ in a.next() }
    #expect(xs == (0 ..< 8).map { _ in b.next() })
    #expect(xs != (0 ..< 8).map { _ in c.next() })
}

@Test func simRandomRangesStayInBounds() {
    var r = SimRandom(seed: 7)
    var counts = [Int](repeating: 0, count: 6)
    for _ in 0 ..< 6000 {
        let v = r.int(in: 1 ... 6)
        counts[v - 1] += 1
    }
    #expect(counts.allSatisfy { $0 > 900 && $0 < 1100 })
    #expect(r.below(0) == 0)
    #expect(r.int(in: 5 ... 5) == 5)
    #expect(r.int(in: Int.min ... Int.max) != r.int(in: Int.min ... Int.max))
}
