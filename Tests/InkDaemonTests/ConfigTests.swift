import Testing
import InkProtocol
import InkUV
@testable import InkDaemon

@Suite struct ConfigTests {
    func parse(_ arguments: [String], _ environment: [String: String] = [:], files: [String: String] = [:]) throws(ConfigError) -> DaemonConfig {
        try DaemonConfig.parse(arguments: arguments, environment: environment, readFile: { files[$0] })
    }

    @Test func defaults() throws {
        let config = try parse([])
        #expect(config.udp == [SocketAddress("[::]:7420")!])
        #expect(config.tcp == [SocketAddress("[::]:7420")!])
        #expect(config.legacy.isEmpty)
        #expect(config.dataDir == "./inkwire-data")
        #expect(config.durability == .batch)
        #expect(config.retain == .board)
        #expect(config.tokenSecretFile == nil)
        #expect(config.metrics == nil)
        #expect(config.limits == DaemonLimits())
        #expect(config.limits.tcpRetransmitCeilingMs == 2000)
        #expect(try parse(["--tcp-rto-max-ms", "0"]).limits.tcpRetransmitCeilingMs == 0)
        #expect(try parse([], ["INKWIRE_TCP_RTO_MAX_MS": "750"]).limits.tcpRetransmitCeilingMs == 750)
    }

    @Test func webSettings() throws {
        #expect(try parse([]).web.isEmpty)
        let config = try parse(["--web", "127.0.0.1:7421", "--web-origin", "HTTPS://Board.School.Example:8443"],
                               ["INKWIRE_WEB_CERT_FILE": "/c.pem", "INKWIRE_WEB_KEY_FILE": "/k.pem"])
        #expect(config.web == [SocketAddress("127.0.0.1:7421")!])
        #expect(config.webCertFile == "/c.pem" && config.webKeyFile == "/k.pem")
        #expect(config.webOrigins == ["https://board.school.example:8443"])
        #expect(try parse(["--web", "off"]).web.isEmpty)
        #expect(throws: ConfigError.self) { try parse(["--web-cert-file", "/c.pem"]) }
        #expect(throws: ConfigError.self) { try parse(["--web-origin", "board.school.example"]) }
        #expect(throws: ConfigError.self) { try parse(["--web-origin", "https://board.school.example/room"]) }
        #expect(try parse(["--max-web-connections", "5"]).limits.maxWebConnections == 5)
        #expect(ConfigFlag.defaultWebPort == ConfigFlag.defaultPort + 1)
    }

    @Test func quotaSettings() throws {
        let defaults = try parse([]).limits
        #expect(defaults.maxSessionsPerUser == 4 && defaults.maxSessionsPerAddress == 8 && defaults.maxLegacyPerAddress == 3)
        #expect(defaults.memberReserve == 8 && defaults.memberTimeoutMs == 120_000 && defaults.memberIdleMs == 60_000)
        #expect(defaults.roomsPerAddressPerMinute == 10 && defaults.emptyRoomExpiryMs == 60_000)
        #expect(defaults.quotaExemptNetworks.map(\.description) == ["127.0.0.1/32", "::1/128"])
        let set = try parse(["--max-sessions-per-user", "2", "--member-timeout", "5m", "--member-idle-after", "90s", "--empty-room-expiry", "0",
                             "--quota-exempt-networks", "10.0.0.0/8"],
                            ["INKWIRE_MAX_SESSIONS_PER_ADDRESS": "0", "INKWIRE_ROOMS_PER_ADDRESS_PER_MINUTE": "30",
                             "INKWIRE_QUOTA_EXEMPT_NETWORKS": "127.0.0.0/8, fd00::/8"]).limits
        #expect(set.maxSessionsPerUser == 2 && set.maxSessionsPerAddress == 0 && set.roomsPerAddressPerMinute == 30)
        #expect(set.memberTimeoutMs == 300_000 && set.memberIdleMs == 90_000 && set.emptyRoomExpiryMs == 0)
        #expect(set.quotaExemptNetworks.map(\.description) == ["10.0.0.0/8"])  // the flag over the environment
        #expect(try parse([], ["INKWIRE_QUOTA_EXEMPT_NETWORKS": "127.0.0.0/8, fd00::/8"]).limits.quotaExemptNetworks.count == 2)
        #expect(try parse(["--quota-exempt-networks", "none"]).limits.quotaExemptNetworks.isEmpty)
        #expect(try parse(["--member-timeout", "0"]).limits.memberTimeoutMs == 0)
        let bad: [([String], String)] = [
            (["--member-reserve", "256"], "--member-reserve 256 must be below --max-members 256: lower it (0 keeps no places for teachers)"),
            (["--member-timeout", "20s"], "--member-timeout '20s': must be 0 (never) or longer than the devices' keepalive, 20 s"),
            (["--max-sessions-per-user", "-1"], "--max-sessions-per-user '-1': expected a whole number from 0 to 65536"),
            (["--quota-exempt-networks", "10.1.0.0/8"], "--quota-exempt-networks '10.1.0.0/8': invalid address '10.1.0.0/8': host bits are set; the network is 10.0.0.0/8 (networks are CIDR,CIDR...: 127.0.0.1/32, fd00::/8; or none)"),
            (["--empty-room-expiry", "1w"], "--empty-room-expiry '1w': expected a duration like 90s, 15m, 12h or 30d (0: never), at most 3650d"),
        ]
        for (arguments, message) in bad {
            #expect(throws: ConfigError(message)) { try parse(arguments) }
        }
        // Every quota reloads with the file.
        for name in ["max-sessions-per-user", "max-sessions-per-address", "max-legacy-per-address", "member-reserve", "member-timeout",
                     "member-idle-after", "rooms-per-address-per-minute", "empty-room-expiry", "quota-exempt-networks", "max-rooms", "max-members"] {
            #expect(ConfigFlag.named(name)?.reloadable == true, "\(name)")
        }
    }

    @Test func flagsOverEnvironmentOverFile() throws {
        let file = "# comment\n\nINKWIRE_LOG_LEVEL=\"warning\"\nINKWIRE_MAX_ROOMS=6\nINKWIRE_TCP=127.0.0.1:1, 127.0.0.1:2\nINKWIRE_RETAIN=full\n"
        let config = try parse(["--legacy", "127.0.0.1:5000=a", "--legacy=[::1]:5001=b=c", "--config", "/etc/inkwired.env", "--max-rooms", "7"],
                               ["INKWIRE_MAX_ROOMS": "5", "INKWIRE_LOG_LEVEL": "debug", "INKWIRE_UDP": "off", "INKWIRE_MAX_MEMBERS": "9"],
                               files: ["/etc/inkwired.env": file])
        #expect(config.legacy == [LegacyBinding(address: SocketAddress("127.0.0.1:5000")!, room: "a"),
                                  LegacyBinding(address: SocketAddress("[::1]:5001")!, room: "b=c")])
        #expect(config.limits.maxRooms == 7)               // flag over environment over file
        #expect(config.limits.maxMembersPerRoom == 9)      // environment alone
        #expect(config.logLevel == .debug)                 // environment over file
        #expect(config.retain == .full)                    // file alone
        #expect(config.udp.isEmpty)
        #expect(config.tcp == [SocketAddress("127.0.0.1:1")!, SocketAddress("127.0.0.1:2")!])
        #expect(config.configFile == "/etc/inkwired.env")
        // INKWIRE_CONFIG in the environment names the file too; --flag=value is --flag value.
        let fromEnvironment = try parse(["--max-rooms=8"], ["INKWIRE_CONFIG": "/etc/inkwired.env"], files: ["/etc/inkwired.env": file])
        #expect(fromEnvironment.logLevel == .warning)
        #expect(fromEnvironment.limits.maxRooms == 8)
    }

    @Test func theFileIsReadAsItIsNow() throws {
        // What a reload does: the same flags and environment, the file as it is now.
        let arguments = ["--config", "f"]
        let environment = ["INKWIRE_MAX_SESSIONS": "50"]
        let before = try parse(arguments, environment, files: ["f": "INKWIRE_LOG_LEVEL=debug\nINKWIRE_MAX_SESSIONS=9\nINKWIRE_RETAIN=full\n"])
        #expect(before.logLevel == .debug && before.limits.maxSessions == 50 && before.retain == .full)
        let after = try parse(arguments, environment, files: ["f": "INKWIRE_RETAIN=full\n"])
        #expect(after.logLevel == .info)  // the removed line no longer applies
        #expect(after.limits.maxSessions == 50)
    }

    @Test func helpAndVersionSpellings() throws {
        #expect(try parse(["-h"]).showHelp)
        #expect(try parse(["--help"]).showHelp)
        #expect(try parse(["--version"]).showVersion)
        #expect(try parse(["--udp=off", "--tcp=127.0.0.1:0"]).udp.isEmpty)
    }

    @Test func aFileMayNameItselfButNoOtherFile() throws {
        #expect(try parse(["--config", "f"], files: ["f": "INKWIRE_CONFIG=f\nINKWIRE_LOG_LEVEL=error\n"]).logLevel == .error)
        #expect(throws: ConfigError("f:1: INKWIRE_CONFIG cannot name another file")) {
            try parse(["--config", "f"], files: ["f": "INKWIRE_CONFIG=g\n", "g": ""])
        }
    }

    @Test(arguments: [
        (["stray"], "unexpected argument 'stray' (see --help)"),
        (["--help=yes"], "--help takes no value"),
        (["--retain", "some"], "--retain 'some': expected full or board"),
        (["--metrics", "host:80"], "--metrics: invalid address 'host:80': host must be an IPv4 address, localhost, or [IPv6]"),
        (["--config", "/missing"], "--config /missing: cannot read the file"),
        (["--legacy", "127.0.0.1:1="], "--legacy '127.0.0.1:1=': ROOM must be 1 to 64 bytes without control characters"),
        (["--tcp-rto-max-ms", "120001"], "--tcp-rto-max-ms '120001': expected a whole number from 0 to 120000"),
    ])
    func errors(arguments: [String], message: String) {
        #expect(throws: ConfigError(message)) { try parse(arguments) }
    }

    @Test func legacyListenersTakeNetworks() throws {
        let flags = try parse(["--legacy", "127.0.0.1:7421=maths 4b@10.0.0.0/8, 192.168.10.0/24", "--legacy", "[::1]:7422=art@fd00::/8,::1",
                               "--legacy", "127.0.0.1:7423=open=room"])
        #expect(flags.legacy == [
            LegacyBinding(address: SocketAddress("127.0.0.1:7421")!, room: "maths 4b",
                          networks: [try AddressPrefix.parse("10.0.0.0/8"), try AddressPrefix.parse("192.168.10.0/24")]),
            LegacyBinding(address: SocketAddress("[::1]:7422")!, room: "art", networks: [try AddressPrefix.parse("fd00::/8"), try AddressPrefix.parse("::1/128")]),
            LegacyBinding(address: SocketAddress("127.0.0.1:7423")!, room: "open=room"),
        ])
        // The environment and the file separate listeners with commas too: a piece without '='
        // continues the networks of the listener before it.
        let environment = try parse([], ["INKWIRE_LEGACY": "0.0.0.0:7421=maths@10.0.0.0/8,192.168.0.0/16, 0.0.0.0:7422=art, 0.0.0.0:7423=music@172.16.0.0/12"])
        #expect(environment.legacy.map(\.room) == ["maths", "art", "music"])
        #expect(environment.legacy.map { $0.networks.map(\.description) } == [["10.0.0.0/8", "192.168.0.0/16"], [], ["172.16.0.0/12"]])
        let file = try parse(["--config", "f"], files: ["f": "INKWIRE_LEGACY=0.0.0.0:7421=maths@10.0.0.0/8,fd00::/8\n"])
        #expect(file.legacy.first?.networks.map(\.description) == ["10.0.0.0/8", "fd00::/8"])
        let many = (0..<LegacyBinding.maxNetworks).map { "10.0.\($0).0/24" }.joined(separator: ",")
        #expect(try parse(["--legacy", "127.0.0.1:1=r@" + many]).legacy.first?.networks.count == LegacyBinding.maxNetworks)
    }

    @Test(arguments: [
        ("127.0.0.1:1=r@", "--legacy '127.0.0.1:1=r@': invalid address '': expected ADDRESS/LENGTH, at most 64 bytes (networks are CIDR,CIDR...: 10.0.0.0/8, fd00::/8; ROOM must not contain '@')"),
        ("127.0.0.1:1=r@10.1.0.0/8", "--legacy '127.0.0.1:1=r@10.1.0.0/8': invalid address '10.1.0.0/8': host bits are set; the network is 10.0.0.0/8 (networks are CIDR,CIDR...: 10.0.0.0/8, fd00::/8; ROOM must not contain '@')"),
        ("127.0.0.1:1=r@10.0.0.0/8,,", "--legacy '127.0.0.1:1=r@10.0.0.0/8,,': invalid address '': expected ADDRESS/LENGTH, at most 64 bytes (networks are CIDR,CIDR...: 10.0.0.0/8, fd00::/8; ROOM must not contain '@')"),
        ("127.0.0.1:1=teacher@school", "--legacy '127.0.0.1:1=teacher@school': invalid address 'school': expected an IPv4 or IPv6 network such as 10.0.0.0/8 or fd00::/8 (networks are CIDR,CIDR...: 10.0.0.0/8, fd00::/8; ROOM must not contain '@')"),
        ("127.0.0.1:1=@10.0.0.0/8", "--legacy '127.0.0.1:1=': ROOM must be 1 to 64 bytes without control characters"),
        ("10.0.0.0/8", "--legacy '10.0.0.0/8': expected HOST:PORT=ROOM[@CIDR,CIDR...]"),
    ])
    func legacyNetworkErrors(text: String, message: String) {
        #expect(throws: ConfigError(message)) { try parse(["--legacy", text]) }
    }

    @Test func legacyNetworkBounds() {
        let tooMany = (0...LegacyBinding.maxNetworks).map { "10.0.\($0).0/24" }.joined(separator: ",")
        #expect(throws: ConfigError("--legacy '127.0.0.1:1=r@\(tooMany)': at most 64 networks per listener")) { try parse(["--legacy", "127.0.0.1:1=r@" + tooMany]) }
        let continued = "127.0.0.1:1=r@10.0.0.0/24," + (1...LegacyBinding.maxNetworks).map { "10.0.\($0).0/24" }.joined(separator: ",")
        #expect(throws: ConfigError("--legacy: at most 64 networks per listener")) { try parse([], ["INKWIRE_LEGACY": continued]) }
        // A bare network after a listener without networks is not a listener.
        #expect(throws: ConfigError("--legacy '10.0.0.0/8': expected HOST:PORT=ROOM[@CIDR,CIDR...]")) {
            try parse([], ["INKWIRE_LEGACY": "127.0.0.1:1=r,10.0.0.0/8"])
        }
    }

    @Test func configFileErrorsNameTheLine() {
        #expect(throws: ConfigError("f:2: unknown setting INKWIRE_COLOUR")) {
            try parse(["--config", "f"], files: ["f": "INKWIRE_UDP=off\nINKWIRE_COLOUR=red\n"])
        }
        #expect(throws: ConfigError("f:1: expected INKWIRE_NAME=value")) { try parse(["--config", "f"], files: ["f": "udp off"]) }
    }

    @Test func environmentNames() {
        #expect(ConfigFlag.named("data-dir")?.environmentName == "INKWIRE_DATA_DIR")
        #expect(ConfigFlag.named("token-secret-file")?.environmentName == "INKWIRE_TOKEN_SECRET_FILE")
    }
}

@Suite struct StreamFramingTests {
    @Test func splitsAndJoinsFrames() throws {
        var decoder = StreamFrameDecoder(maxFrameBytes: 16)
        let wire = StreamFrameDecoder.frame([1, 2, 3]) + StreamFrameDecoder.frame([]) + StreamFrameDecoder.frame(Array(repeating: 9, count: 16))
        var frames: [[UInt8]] = []
        for byte in wire {
            [byte].withUnsafeBytes { decoder.handleBytes($0) }
            while let frame = try decoder.pollFrame() { frames.append(frame) }
        }
        #expect(frames == [[1, 2, 3], [], Array(repeating: 9, count: 16)])
        #expect(decoder.bufferedByteCount == 0)
        StreamFrameDecoder.frame(Array(repeating: 0, count: 17)).withUnsafeBytes { decoder.handleBytes($0) }
        #expect(throws: StreamFrameDecoder.Failure.frameTooLarge(length: 17, limit: 16)) { try decoder.pollFrame() }
    }
}
