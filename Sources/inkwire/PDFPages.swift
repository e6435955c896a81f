// A PDF's pages as images, rendered by Debian's poppler-utils (pdfinfo, pdftoppm) in separate
// processes with bounds on pages, pixels, memory, CPU and wall time: a hostile PDF (a bomb)
// costs a killed child process and a refusal, never this process.
import Foundation
import InkImage

struct PDFBounds {
    /// Pages a PDF may have; more is refused before anything is rendered.
    var maxPages = 100
    /// Longest side of a rendered page, pixels (pdftoppm -scale-to).
    var maxSidePixels = 2000
    /// Wall time for one poppler process, seconds (then it is killed).
    var timeoutSeconds: Double = 60
    /// Address space of one poppler process, bytes (prlimit --as), and its CPU seconds.
    var maxMemoryBytes = 1 << 30
    var maxCPUSeconds = 120
    /// Largest PDF file read.
    var maxFileBytes = 256 * 1024 * 1024
}

struct PDFError: Error, CustomStringConvertible {
    var description: String
}

enum PDFPages {
    /// The pages of the PDF at `path` as JPEGs, in order (`inkwire background --pdf`).
    static func render(_ path: String, bounds: PDFBounds) throws(PDFError) -> [[UInt8]] {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path), let size = attributes[.size] as? Int else {
            throw PDFError(description: "cannot read \(path)")
        }
        guard size <= bounds.maxFileBytes else { throw PDFError(description: "\(path) is \(size) bytes, more than \(bounds.maxFileBytes)") }
        let dir = NSTemporaryDirectory() + "inkwire-pdf-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard (try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])) != nil else {
            throw PDFError(description: "cannot make \(dir)")
        }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let info = try run("pdfinfo", [path], in: dir, bounds: bounds)
        guard let pagesLine = info.split(separator: "\n").first(where: { $0.hasPrefix("Pages:") }),
              let pages = Int(pagesLine.dropFirst("Pages:".count).trimmingCharacters(in: .whitespaces)), pages >= 1 else {
            throw PDFError(description: "\(path): pdfinfo found no pages")
        }
        guard pages <= bounds.maxPages else { throw PDFError(description: "\(path) has \(pages) pages, more than \(bounds.maxPages)") }
        _ = try run("pdftoppm", ["-jpeg", "-jpegopt", "quality=85", "-scale-to", "\(bounds.maxSidePixels)", "-l", "\(pages)",
                                 path, dir + "/page"], in: dir, bounds: bounds)
        // pdftoppm names pages page-1.jpg or page-01.jpg ... (zero-padded to the page count's width).
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasPrefix("page-") && $0.hasSuffix(".jpg") }
        let numbered = names.compactMap { name -> (Int, String)? in
            guard let n = Int(name.dropFirst("page-".count).dropLast(".jpg".count)) else { return nil }
            return (n, name)
        }.sorted { $0.0 < $1.0 }
        guard numbered.count == pages else { throw PDFError(description: "\(path): pdftoppm rendered \(numbered.count) of \(pages) pages") }
        return try numbered.map { (n, name) throws(PDFError) in
            guard let data = FileManager.default.contents(atPath: dir + "/" + name) else { throw PDFError(description: "page \(n) was not written") }
            return [UInt8](data)
        }
    }

    /// Runs a poppler tool under prlimit (memory, CPU) with a wall-time limit; its output
    /// (what it prints goes to files in `dir`: no pipe to fill, no reader thread).
    private static func run(_ tool: String, _ arguments: [String], in dir: String, bounds: PDFBounds) throws(PDFError) -> String {
        let outPath = dir + "/\(tool).out", errPath = dir + "/\(tool).err"
        guard FileManager.default.createFile(atPath: outPath, contents: nil), FileManager.default.createFile(atPath: errPath, contents: nil),
              let out = FileHandle(forWritingAtPath: outPath), let err = FileHandle(forWritingAtPath: errPath) else {
            throw PDFError(description: "cannot write in \(dir)")
        }
        defer {
            try? out.close()
            try? err.close()
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        process.arguments = ["--as=\(bounds.maxMemoryBytes)", "--cpu=\(bounds.maxCPUSeconds)", "--", tool] + arguments
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        do { try process.run() } catch {
            throw PDFError(description: "cannot run \(tool) (install Debian's poppler-utils): \(error)")
        }
        if done.wait(timeout: .now() + bounds.timeoutSeconds) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            done.wait()
            throw PDFError(description: "\(tool) took more than \(bounds.timeoutSeconds) s: killed (a hostile or too complex PDF)")
        }
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            let errors = FileManager.default.contents(atPath: errPath) ?? Data()
            let text = String(decoding: errors.prefix(400), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let how = process.terminationReason == .exit ? "exit \(process.terminationStatus)" : "killed by signal \(process.terminationStatus)"
            throw PDFError(description: "\(tool) failed (\(how)): \(text)")
        }
        return String(decoding: (FileManager.default.contents(atPath: outPath) ?? Data()).prefix(1 << 20), as: UTF8.self)
    }
}
