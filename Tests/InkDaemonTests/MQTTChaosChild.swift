import Glibc

/// `inkwire-bench mqtt-chaos` (the MQTT chaos proxy: delays, duplicates and reorders
/// PUBLISH packets) as a child process between a daemon and the broker. Killed on deinit.
final class MQTTChaosChild {
    let pid: pid_t
    let port: UInt16
    let outPath: String

    static var binaryPath: String { String(DaemonProcess.binaryPath.dropLast("inkwired".count)) + "inkwire-bench" }
    static var isBuilt: Bool { access(binaryPath, X_OK) == 0 }

    init(brokerPort: UInt16, seed: UInt64, arguments: [String], directory: String) throws {
        outPath = directory + "/mqtt-chaos-\(seed)-\(UInt32.random(in: 0...UInt32.max)).out"
        pid = try ChildSpawn.spawn([MQTTChaosChild.binaryPath, "mqtt-chaos", "--listen", "127.0.0.1:0", "--forward", "127.0.0.1:\(brokerPort)",
                                    "--seed", String(seed)] + arguments,
                                   environment: ["PATH": "/usr/bin:/bin"], redirects: [(0, .file("/dev/null")), (1, .file(outPath)), (2, .file(outPath + ".err"))])
        let deadline = monotonicMicroseconds() + 10_000_000
        var found: UInt16?
        while found == nil && monotonicMicroseconds() < deadline {
            let text = String(decoding: readFile(outPath), as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ready ") }) {
                found = DaemonProcess.port(parseLogfmt(String(line))["listen"])
            } else {
                usleep(10_000)
            }
        }
        guard let found else {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw DaemonProcess.SpawnError(message: "mqtt-chaos did not start: \(String(decoding: readFile(outPath + ".err"), as: UTF8.self))")
        }
        port = found
    }

    deinit {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}
