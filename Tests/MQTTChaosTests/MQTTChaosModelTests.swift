import MQTTChaos
import Testing

private let chaotic = MQTTChaosConfiguration(delayMicroseconds: 1000, jitterMicroseconds: 20_000, duplicateChance: 0.1,
                                             burstChance: 0.05, maximumBurstLength: 6)

private func decisions(_ configuration: MQTTChaosConfiguration, seed: UInt64, count: Int) -> [MQTTChaosDecision] {
    var model = MQTTChaosModel(configuration: configuration, seed: seed)
    return (0..<count).map { _ in model.next() }
}

@Test func sameSeedSameDecisionsOtherSeedOthers() {
    #expect(decisions(chaotic, seed: 5, count: 500) == decisions(chaotic, seed: 5, count: 500))
    #expect(decisions(chaotic, seed: 5, count: 500) != decisions(chaotic, seed: 6, count: 500))
}

@Test func decisionsStayInsideTheirBoundsAndBurstsEndWithARelease() {
    let all = decisions(chaotic, seed: 9, count: 5000)
    #expect(all.allSatisfy { (1000...21_000).contains($0.delayMicroseconds) })
    #expect(all.allSatisfy { $0.duplicateDelayMicroseconds.map { (1000...21_000).contains($0) } ?? true })
    let duplicates = all.filter { $0.duplicateDelayMicroseconds != nil }.count
    #expect((350...650).contains(duplicates), "seed 9: \(duplicates) duplicates of 5000 at 10 %")
    var run = 0
    for decision in all {
        switch decision.burst {
        case .none: #expect(run == 0)
        case .held: run += 1
        case .releases:
            #expect(run + 1 <= 6 && run + 1 >= 2)
            run = 0
        }
    }
}

@Test func quietConfigurationDecidesNothing() {
    #expect(decisions(MQTTChaosConfiguration(), seed: 3, count: 100).allSatisfy { $0 == MQTTChaosDecision(delayMicroseconds: 0) })
    #expect(MQTTChaosConfiguration().isQuiet && !chaotic.isQuiet)
}

@Test func streamSeedsDependOnClientOrdinalAndDirection() {
    let a = MQTTChaosModel.streamSeed(runSeed: 1, clientIdentifier: Array("a".utf8), connectionOrdinal: 0, direction: .clientToBroker)
    #expect(a == MQTTChaosModel.streamSeed(runSeed: 1, clientIdentifier: Array("a".utf8), connectionOrdinal: 0, direction: .clientToBroker))
    let others = [
        MQTTChaosModel.streamSeed(runSeed: 2, clientIdentifier: Array("a".utf8), connectionOrdinal: 0, direction: .clientToBroker),
        MQTTChaosModel.streamSeed(runSeed: 1, clientIdentifier: Array("b".utf8), connectionOrdinal: 0, direction: .clientToBroker),
        MQTTChaosModel.streamSeed(runSeed: 1, clientIdentifier: Array("a".utf8), connectionOrdinal: 1, direction: .clientToBroker),
        MQTTChaosModel.streamSeed(runSeed: 1, clientIdentifier: Array("a".utf8), connectionOrdinal: 0, direction: .brokerToClient),
    ]
    #expect(!others.contains(a) && Set(others).count == others.count)
}
