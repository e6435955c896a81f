// Writes the build's version (the VERSION file) and git commit into the InkVersion module before
// every build, so `--version`, the ready line, /metrics and the Debian package say the same.
import Foundation
import PackagePlugin

@main
struct VersionStamp: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let root = context.package.directoryURL
        // A prebuild command runs at every build (the commit changes without any input file
        // SwiftPM could watch); the script rewrites its output only when the text changes.
        return [.prebuildCommand(
            displayName: "Stamping the Inkwire version",
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: [root.appending(path: "deploy/version-stamp.sh").path, root.path, output.path],
            outputFilesDirectory: output)]
    }
}
