import Foundation
import Testing
import XTalkTestSupport

/// The documentation's code samples compile: every Swift block of every
/// article in the DocC catalogs (`Sources/*/*.docc`) must appear verbatim in
/// one of this target's `Snippets/*.swift` files, which the build compiles,
/// so an API change breaks the build, not the reader. A package manifest
/// sample (its first line `// swift-tools-version:`) is checked by SwiftPM.
@Suite("Documentation: every code sample compiles", .timeLimit(.minutes(5)))
struct DocumentationSnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Block: CustomStringConvertible {
        let file: String
        let line: Int
        let lines: [String]
        var description: String { "\(file):\(line)" }
        var isManifest: Bool { lines.first?.hasPrefix("// swift-tools-version:") == true }
    }

    /// Every ```swift block of every article in the catalogs.
    static func articleBlocks() throws -> [Block] {
        var blocks: [Block] = []
        for article in try articles() {
            let text = try String(contentsOf: article, encoding: .utf8)
            let name = article.path.replacingOccurrences(of: root.path + "/", with: "")
            blocks += swiftBlocks(in: text, file: name)
        }
        return blocks
    }

    static func articles() throws -> [URL] {
        let sources = root.appendingPathComponent("Sources")
        var found: [URL] = []
        for target in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let targetURL = sources.appendingPathComponent(target)
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: targetURL.path)) ?? []
            for catalog in entries.sorted() where catalog.hasSuffix(".docc") {
                let catalogURL = targetURL.appendingPathComponent(catalog)
                let files = FileManager.default.enumerator(atPath: catalogURL.path)?.compactMap { $0 as? String } ?? []
                found += files.sorted().filter { $0.hasSuffix(".md") }.map { catalogURL.appendingPathComponent($0) }
            }
        }
        return found
    }

    static func swiftBlocks(in text: String, file: String) -> [Block] {
        var blocks: [Block] = []
        var current: (start: Int, lines: [String])?
        for (index, line) in text.components(separatedBy: "\n").enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if var open = current {
                if trimmed == "```" {
                    blocks.append(Block(file: file, line: open.start, lines: open.lines))
                    current = nil
                } else {
                    open.lines.append(line)
                    current = open
                }
            } else if trimmed == "```swift" {
                current = (index + 1, [])
            }
        }
        return blocks
    }

    /// Whether `block` appears in `source` as consecutive lines, each with the same added indentation.
    static func contains(_ source: [String], _ block: [String]) -> Bool {
        guard let first = block.first(where: { !$0.isEmpty }) else { return true }
        for start in source.indices where source[start].hasSuffix(first) {
            guard let firstIndex = block.firstIndex(of: first), start - firstIndex >= 0 else { continue }
            let origin = start - firstIndex
            let indent = String(source[start].dropLast(first.count))
            guard indent.allSatisfy({ $0 == " " }), origin + block.count <= source.count else { continue }
            let matches = zip(block, source[origin..<(origin + block.count)]).allSatisfy { expected, actual in
                expected.isEmpty ? actual.trimmingCharacters(in: .whitespaces).isEmpty : actual == indent + expected
            }
            if matches { return true }
        }
        return false
    }

    static func snippetSources() throws -> [[String]] {
        let folder = root.appendingPathComponent("Tests/XTalkDocumentationTests/Snippets")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            .filter { $0.hasSuffix(".swift") }
            .map { try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8) }
            .map { $0.components(separatedBy: "\n") }
    }

    @Test("every Swift sample in the articles is in a compiled snippet file")
    func samplesAreCompiled() throws {
        let blocks = try Self.articleBlocks().filter { !$0.isManifest }
        #expect(blocks.count >= 8, "the catalogs' samples were found (\(blocks.count))")
        let sources = try Self.snippetSources()
        for block in blocks where !sources.contains(where: { Self.contains($0, block.lines) }) {
            let text = block.lines.joined(separator: "\n")
            Issue.record("\(block): this sample is in no file of Tests/XTalkDocumentationTests/Snippets:\n\(text)")
        }
    }

    @Test("the checker finds a sample that differs from its snippet by one character")
    func checkerFlagsAChangedSample() throws {
        let source = ["func f() {", "    let x = 1", "    print(x)", "}"]
        #expect(Self.contains(source, ["let x = 1", "print(x)"]))
        #expect(!Self.contains(source, ["let x = 2", "print(x)"]))
        #expect(!Self.contains(source, ["let x = 1", "  print(x)"]), "the indentation added must be the same")
        #expect(!Self.contains(source, ["let x = 1", "print(x)", "print(x)"]))
    }

    @Test("package manifest samples are valid manifests (SwiftPM reads them)")
    func manifestsParse() throws {
        let manifests = try Self.articleBlocks().filter(\.isManifest)
        #expect(!manifests.isEmpty, "the Getting started article shows how to add the package")
        for manifest in manifests {
            let folder = FileManager.default.temporaryDirectory
                .appendingPathComponent("xtalk-manifest-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            try manifest.lines.joined(separator: "\n").write(
                to: folder.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
            let (status, text) = try runTool(["swift", "package", "--package-path", folder.path, "dump-package"])
            #expect(status == 0, "\(manifest): \(text)")
        }
    }
}
