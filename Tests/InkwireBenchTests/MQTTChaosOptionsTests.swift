import Testing
@testable import inkwire_bench

@Test func mqttChaosOptionsParseIntoTheModel() throws {
    let options = try MQTTChaosOptions(["--listen", "127.0.0.1:0", "--forward", "127.0.0.1:1883", "--delay-ms", "2",
                                        "--jitter-ms", "20.5", "--duplicate-percent", "5", "--burst-percent", "1", "--burst-max", "4",
                                        "--seed", "9", "--duration", "3"])
    #expect(options.chaos.delayMicroseconds == 2000 && options.chaos.jitterMicroseconds == 20_500)
    #expect(options.chaos.duplicateChance == 0.05 && options.chaos.burstChance == 0.01 && options.chaos.maximumBurstLength == 4)
    #expect(options.seed == 9 && options.durationSeconds == 3 && options.forward.port == 1883)
    let quiet = try MQTTChaosOptions(["--listen", "127.0.0.1:0", "--forward", "127.0.0.1:1883"])
    #expect(quiet.chaos.isQuiet && quiet.seed == 1)
}

@Test func mqttChaosOptionsRejectBadValuesWithAMessage() {
    #expect(throws: MQTTChaosOptions.Invalid.self) { try MQTTChaosOptions(["--listen", "127.0.0.1:0"]) }
    for bad in [["--duplicate-percent", "101"], ["--jitter-ms", "-1"], ["--burst-max", "1"], ["--seed", "x"], ["--loss-percent", "1"]] {
        #expect(throws: MQTTChaosOptions.Invalid.self, "\(bad)") {
            try MQTTChaosOptions(["--listen", "127.0.0.1:0", "--forward", "127.0.0.1:1"] + bad)
        }
    }
}
