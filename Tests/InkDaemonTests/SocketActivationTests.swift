import Testing
import Glibc
@testable import InkDaemon

@Suite struct SocketActivationTests {
    @Test func namedDescriptors() throws {
        let activation = try #require(try SocketActivation.parse(
            environment: ["LISTEN_FDS": "3", "LISTEN_PID": "77", "LISTEN_FDNAMES": "udp:tcp:udp"], pid: 77))
        #expect(activation.sockets == [
            .init(fd: 3, name: "udp"), .init(fd: 4, name: "tcp"), .init(fd: 5, name: "udp"),
        ])
        #expect(activation.descriptors(named: "udp") == [3, 5])
        #expect(activation.descriptors(named: "tcp") == [4])
        #expect(activation.descriptors(named: "legacy") == [])
    }

    @Test func unnamedDescriptors() throws {
        let activation = try #require(try SocketActivation.parse(environment: ["LISTEN_FDS": "2", "LISTEN_PID": "9"], pid: 9))
        #expect(activation.descriptors(named: SocketActivation.unnamed) == [3, 4])
    }

    @Test func absentOrForAnotherProcess() throws {
        #expect(try SocketActivation.parse(environment: [:], pid: 9) == nil)
        #expect(try SocketActivation.parse(environment: ["LISTEN_FDS": "1", "LISTEN_PID": "10"], pid: 9) == nil)
        #expect(try SocketActivation.parse(environment: ["LISTEN_FDS": "0", "LISTEN_PID": "9"], pid: 9)?.sockets == [])
    }

    @Test(arguments: [
        ["LISTEN_FDS": "1"],
        ["LISTEN_FDS": "1", "LISTEN_PID": "x"],
        ["LISTEN_FDS": "-1", "LISTEN_PID": "9"],
        ["LISTEN_FDS": "65", "LISTEN_PID": "9"],
        ["LISTEN_FDS": "two", "LISTEN_PID": "9"],
        ["LISTEN_FDS": "2", "LISTEN_PID": "9", "LISTEN_FDNAMES": "only-one"],
        ["LISTEN_FDS": "1", "LISTEN_PID": "9", "LISTEN_FDNAMES": "a:b"],
    ])
    func malformedIsATypedError(environment: [String: String]) {
        #expect(throws: SocketActivation.ParseError.self) { try SocketActivation.parse(environment: environment, pid: 9) }
    }

    @Test func kindOfDescriptor() {
        let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        let tcp = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(udp); close(tcp) }
        #expect(SocketActivation.kind(of: udp) == .datagram)
        #expect(SocketActivation.kind(of: tcp) == .stream)
        #expect(SocketActivation.kind(of: -1) == .other)
    }
}
