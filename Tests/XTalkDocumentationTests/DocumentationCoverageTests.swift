import Foundation
import Testing
import XTalkTestSupport

/// Every public symbol of the SDK products has a doc comment. The symbol
/// graphs come from the toolchain's `swift-symbolgraph-extract`, run on the
/// modules this test build compiled (the same graphs `.ci/docs` gives docc).
@Suite("Documentation: every public symbol of the SDK products is documented", .timeLimit(.minutes(5)))
struct DocumentationCoverageTests {
    /// The products, and XTalkSupport, which both SDKs re-export (its public API is theirs).
    static let products = [
        "XTalkBleSdk", "XTalkDeviceAuthSdk", "XTalkSupport", "XTalkSimulator", "XTalkBleBridge", "XTalkBleBridgeWebKit",
    ]

    @Test("no public symbol without a doc comment", arguments: products)
    func documented(product: String) throws {
        let graph = try SymbolGraphs.load(product)
        #expect(!graph.symbols.isEmpty, "\(product)'s symbol graph lists its public API")
        let missing = graph.symbols.filter { !$0.isDocumented && !$0.isSynthesized }.map(\.path).sorted()
        let list = missing.joined(separator: "\n")
        #expect(missing.isEmpty, "\(product): \(missing.count) public symbols without a doc comment:\n\(list)")
    }

    @Test("the check sees a symbol without a doc comment (an undocumented fixture)")
    func checkerSeesUndocumented() throws {
        let json = """
            {"symbols": [
              {"kind": {"identifier": "swift.func"}, "identifier": {"precise": "s:1A1fyyF"},
               "pathComponents": ["f()"], "accessLevel": "public"},
              {"kind": {"identifier": "swift.func"}, "identifier": {"precise": "s:1A1gyyF"},
               "pathComponents": ["g()"], "accessLevel": "public",
               "docComment": {"lines": [{"text": "Does g."}]}}
            ]}
            """
        let graph = try SymbolGraphs.Graph(data: Data(json.utf8))
        #expect(graph.symbols.filter { !$0.isDocumented }.map(\.path) == ["f()"])
    }
}

/// Symbol graphs of this build's modules, extracted once per process.
enum SymbolGraphs {
    struct Symbol {
        let path: String
        let kind: String
        let precise: String
        let docLines: [String]
        let docModule: String?
        /// The path's components (`Type`, `member(label:)`).
        var components: [String] = []
        /// A function's parameters' internal names, in order.
        var parameters: [String] = []
        var isDocumented: Bool { docLines.contains { !$0.trimmingCharacters(in: .whitespaces).isEmpty } }
        /// Declarations the compiler writes (memberwise conformances and the like), not the SDK's authors.
        var isSynthesized: Bool { precise.contains("::SYNTHESIZED::") }
    }

    struct Graph {
        let symbols: [Symbol]

        init(data: Data) throws {
            guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any],
                let symbols = root["symbols"] as? [[String: Any]]
            else { throw GraphError("not a symbol graph") }
            self.symbols = symbols.compactMap { symbol in
                guard let kind = (symbol["kind"] as? [String: Any])?["identifier"] as? String,
                    let precise = (symbol["identifier"] as? [String: Any])?["precise"] as? String,
                    let path = symbol["pathComponents"] as? [String]
                else { return nil }
                let doc = symbol["docComment"] as? [String: Any]
                let lines = (doc?["lines"] as? [[String: Any]])?.compactMap { $0["text"] as? String } ?? []
                let parameters = ((symbol["functionSignature"] as? [String: Any])?["parameters"] as? [[String: Any]])?
                    .compactMap { $0["name"] as? String }
                return Symbol(
                    path: path.joined(separator: "."), kind: kind, precise: precise, docLines: lines,
                    docModule: doc?["module"] as? String, components: path, parameters: parameters ?? [])
            }
        }
    }

    struct GraphError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The build directory of this test bundle (`.build/<configuration>`).
    static var binPath: URL { URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent() }

    /// The product's symbols (its own module's graph; extensions of other modules' types too).
    static func load(_ module: String) throws -> Graph {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("xtalk-symbols-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (status, text) = try runTool([
            "swift-symbolgraph-extract", "-module-name", module, "-target", try targetTriple(),
            "-I", binPath.appendingPathComponent("Modules").path, "-I", binPath.path,
            "-minimum-access-level", "public", "-output-dir", folder.path,
        ])
        guard status == 0 else { throw GraphError("swift-symbolgraph-extract failed for \(module): \(text)") }
        var symbols: [Symbol] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        where file.hasPrefix(module) && file.hasSuffix(".symbols.json") {
            symbols += try Graph(data: Data(contentsOf: folder.appendingPathComponent(file))).symbols
        }
        return Graph(symbols: symbols)
    }

    static func targetTriple() throws -> String {
        #if arch(x86_64)
            let arch = "x86_64"
        #elseif arch(arm64)
            let arch = "aarch64"
        #else
            throw GraphError("unknown architecture")
        #endif
        #if os(Linux)
            return "\(arch)-unknown-linux-gnu"
        #elseif os(macOS)
            return "\(arch == "aarch64" ? "arm64" : arch)-apple-macosx13.0"
        #else
            throw GraphError("unknown platform")
        #endif
    }
}

extension SymbolGraphs.Graph {
    init(symbols: [SymbolGraphs.Symbol]) { self.symbols = symbols }
}
