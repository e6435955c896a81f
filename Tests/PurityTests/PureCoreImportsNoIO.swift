import Foundation
import Testing

/// The sans-IO core must stay portable to iOS/Android clients and testable in virtual time:
/// it may not import Foundation, the C library, Dispatch or libuv. The legacy app model is held
/// to the same rule, so one seed replays a whole legacy run.
private let pureModules = ["Sources/InkCodec", "Sources/InkProtocol", "Sources/InkRelay", "Sources/InkSim", "Sources/InkClient",
                           "Sources/InkWeb", "Sources/InkLegacy", "Benchmarks/LegacyAppModel"]
private let forbidden = ["Foundation", "FoundationEssentials", "Glibc", "Darwin", "Musl", "Dispatch", "CLibUV", "InkUV", "CSQLite", "InkStore",
                         "InkImage", "CPNG", "CTurboJPEG"]

private func packageRoot() -> URL {
    // Tests/PurityTests/<this file> -> package root.
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

private func importedModules(in source: String) -> [String] {
    source.split(separator: "\n").compactMap { rawLine in
        var words = rawLine.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        while let first = words.first, first.hasPrefix("@") { words.removeFirst() }
        guard words.first == "import", words.count >= 2 else { return nil }
        let target = ["struct", "class", "enum", "func", "var", "let", "protocol", "typealias"].contains(words[1]) && words.count >= 3 ? words[2] : words[1]
        return String(target.split(separator: ".").first ?? Substring(target))
    }
}

@Test("pure core imports nothing that does IO", arguments: pureModules)
func pureModuleImportsNoIO(module: String) throws {
    let dir = packageRoot().appendingPathComponent(module)
    let files = try #require(FileManager.default.enumerator(at: dir, includingPropertiesForKeys: nil))
    var offenders: [String] = []
    for case let url as URL in files where url.pathExtension == "swift" {
        let text = try String(contentsOf: url, encoding: .utf8)
        for name in importedModules(in: text) where forbidden.contains(name) {
            offenders.append("\(url.lastPathComponent) imports \(name)")
        }
    }
    #expect(offenders.isEmpty, "\(module): \(offenders)")
}

@Test func importScannerSeesAttributedAndSubmoduleImports() {
    let found = importedModules(in: "@preconcurrency import Foundation\nimport struct Glibc.timespec\n// import Dispatch\n")
    #expect(found == ["Foundation", "Glibc"])
}
