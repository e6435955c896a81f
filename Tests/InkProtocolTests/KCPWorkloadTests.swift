import Testing
@testable import InkProtocol

@Suite struct KCPWorkloadTests {
    @Test func glibcRandMatchesFirstOutputs() {
        var r = GlibcRandom(seed: 1)
        var first: [UInt32] = []
        for _ in 0..<5 { first.append(r.next()) }
        #expect(first == [1_804_289_383, 846_930_886, 1_681_692_777, 1_714_636_915, 1_957_747_793])
    }

    @Test func kcpLinkGoldenVector() {
        var link = KCPLink(seed: 1)
        var got: [String] = []
        for _ in 0..<40 { got.append(link.send(0, [0], now: .zero).map(String.init) ?? "D") }
        #expect(got.joined(separator: " ") == "36 49 61 42 43 41 57 36 32 54 38 43 56 33 61 56 48 53 54 D 35 35 54 60 41 43 57 50 44 50 31 58 D 39 31 31 37 31 53 58")
    }

    @Test(arguments: [UInt32(1), 2, 3])
    func echoesArriveCompleteAndInOrder(seed: UInt32) {
        let r = runKCPWorkload(seed: seed)
        #expect(r.rtts.count == 1001, "seed \(seed)")
        #expect(r.inOrder, "seed \(seed)")
    }
}
