// The web listener's files (web/: the pages and the JavaScript client), built into the binary
// by the EmbedWebAssets plugin.

public enum WebAssets {
    /// The file served at `path` (`/lib/codec.mjs`) and its Content-Type, if there is one.
    public static func file(_ path: String) -> (bytes: [UInt8], contentType: String)? {
        guard let text = WebAssetFiles.files[path] else { return nil }
        return (Array(text.utf8), contentType(of: path))
    }

    /// Every embedded path, sorted.
    public static var paths: [String] { WebAssetFiles.files.keys.sorted() }

    static func contentType(of path: String) -> String {
        let ext = path.split(separator: ".").last.map(String.init) ?? ""
        switch ext {
        case "html": return "text/html; charset=utf-8"
        case "mjs", "js": return "text/javascript; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "svg": return "image/svg+xml"
        case "json": return "application/json"
        default: return "text/plain; charset=utf-8"
        }
    }
}
