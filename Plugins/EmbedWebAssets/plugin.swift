// Build-tool plugin: embeds the web/ directory (the browser client and its pages, without its
// tests and tools) into the InkWebAssets target as generated Swift source, at build time, so
// inkwired serves files built into its binary and needs nothing on disk.
import Foundation
import PackagePlugin

@main
struct EmbedWebAssets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let web = context.package.directoryURL.appending(path: "web")
        var inputs: [URL] = []
        if let files = FileManager.default.enumerator(at: web, includingPropertiesForKeys: [.isDirectoryKey]) {
            for case let url as URL in files {
                let relative = url.path.dropFirst(web.path.count + 1)
                if relative.hasPrefix("test/") || relative.hasPrefix("tools/") || relative == "test" || relative == "tools" {
                    files.skipDescendants()
                    continue
                }
                if (try? url.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) != true { inputs.append(url) }
            }
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "WebAssetFiles.swift")
        return [.buildCommand(displayName: "Embedding the web client (\(inputs.count) files)", executable: try context.tool(named: "web-embed").url,
                              arguments: [web.path, output.path] + inputs.map(\.path), inputFiles: inputs, outputFiles: [output])]
    }
}
