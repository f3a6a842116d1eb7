import Foundation
import XTalkIndexStoreReader
import XTalkTestSupport

/// What each test of this package uses, exactly: read from the index store
/// the compiler wrote while building the tests (`swift build` indexes debug
/// builds), through the toolchain's libIndexStore. A test is a function with
/// the `@Test` attribute. It uses what its body refers to, what the test code
/// it calls refers to (helpers, harnesses: anything declared under Tests/),
/// and what test types it refers to implement for the SDK to call (a
/// `DeviceAuthTransport` of the tests': its requirements, and what their
/// bodies refer to).
struct TestIndex {
    struct Test: Hashable {
        /// `Suite.function(labels:)`, as the matrix names it.
        let name: String
        let file: String
        let line: Int
        /// Declared inside `#if` (some builds do not have it).
        let conditional: Bool
    }

    struct Reference: Hashable {
        let usr: String
        let file: String
        let line: Int
        let column: Int
        /// Not a reference in the source: a test type implements this requirement, and the SDK calls it.
        var implemented = false
    }

    /// Tests by their symbol's USR.
    let tests: [String: Test]
    /// The references each body in the test sources holds, by its symbol's USR.
    let references: [String: [Reference]]
    /// Each declaration's parent (a member's type), by USR.
    let parents: [String: String]
    /// Each test type's members that implement a requirement: (member, requirement), by the type's USR.
    let implementations: [String: [(member: String, requirement: String)]]

    /// Everything `test` uses: its body's references and, transitively, those
    /// of the test code it reaches (see the type's description).
    func uses(of test: String) -> [Reference] {
        var used: [Reference] = []
        var seen: Set<String> = [test]
        var queue = [test]
        func reach(_ usr: String) {
            if references[usr] != nil, seen.insert(usr).inserted { queue.append(usr) }
        }
        while let body = queue.popLast() {
            for reference in references[body] ?? [] {
                used.append(reference)
                reach(reference.usr)
                // A test type (or its initializer) that implements requirements the SDK calls.
                for type in [reference.usr, parents[reference.usr]].compactMap({ $0 })
                where implementations[type] != nil && seen.insert(type).inserted {
                    for (member, requirement) in implementations[type] ?? [] {
                        used.append(Reference(usr: requirement, file: "", line: 0, column: 0, implemented: true))
                        reach(member)
                    }
                }
            }
        }
        return used
    }

    struct IndexError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The index of this test build (`<build>/index/store`) for the test sources under `root/Tests`.
    static func load(root: URL, build: URL) throws -> TestIndex {
        let store = build.appendingPathComponent("index/store")
        guard FileManager.default.fileExists(atPath: store.path) else {
            throw IndexError(
                "there is no index store at \(store.path): build the tests in debug, with indexing on "
                    + "(swift build's default)")
        }
        let library = try libIndexStore()
        let testsFolder = root.appendingPathComponent("Tests").standardizedFileURL.path + "/"
        let collector = Collector(testsFolder: testsFolder)
        var message = [CChar](repeating: 0, count: 1_024)
        let status = xtalk_index_read(
            library, store.path, Unmanaged.passUnretained(collector).toOpaque(),
            { context, record, file in
                let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
                return collector.accepts(record: String(cString: record!), file: String(cString: file!))
            },
            { context, occurrence in
                let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
                collector.add(occurrence!.pointee)
            }, &message, message.count)
        guard status == 0 else {
            let reason = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw IndexError("reading the index store failed: \(reason)")
        }
        let declarations = try testFunctions(under: URL(fileURLWithPath: testsFolder))
        var index = collector.index(testFunctions: declarations)
        index.declaredBaseNames = Set(declarations.map(\.baseName))
        return index
    }

    /// The base names of every `@Test` function in the sources, whether this build compiles it or not.
    var declaredBaseNames: Set<String> = []

    /// Whether a test of this name is in the sources but not in this build (inside an `#if` this build skips).
    func isDeclaredOnlyElsewhere(_ name: String) -> Bool {
        let base = name.split(separator: ".").last.map { String($0.prefix { $0 != "(" }) } ?? name
        return declaredBaseNames.contains(base) && !tests.values.contains { $0.name == name }
    }

    /// The `@Test` functions' declarations: file, line of `func`, and base name.
    static func testFunctions(under folder: URL) throws -> Set<TestDeclaration> {
        var found: Set<TestDeclaration> = []
        let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            var pending = false
            var conditionDepth = 0
            for (index, line) in lines.enumerated() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("#if ") { conditionDepth += 1 }
                if trimmed.hasPrefix("#endif") { conditionDepth -= 1 }
                if trimmed.hasPrefix("@Test") { pending = true }
                guard pending, let range = funcKeyword(in: trimmed) else { continue }
                let name = trimmed[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
                found.insert(
                    TestDeclaration(
                        file: file.standardizedFileURL.path, line: index + 1, baseName: String(name),
                        conditional: conditionDepth > 0))
                pending = false
            }
        }
        return found
    }

    /// `func ` as a keyword (at the start, or after a space), outside a string literal.
    private static func funcKeyword(in line: String) -> Range<String.Index>? {
        var searchFrom = line.startIndex
        while let range = line.range(of: "func ", range: searchFrom..<line.endIndex) {
            let atWordStart = range.lowerBound == line.startIndex || line[line.index(before: range.lowerBound)] == " "
            let quotesBefore = line[..<range.lowerBound].filter { $0 == "\"" }.count
            if atWordStart, quotesBefore % 2 == 0 { return range }
            searchFrom = range.upperBound
        }
        return nil
    }

    struct TestDeclaration: Hashable {
        let file: String
        let line: Int
        let baseName: String
        let conditional: Bool
    }

    /// The toolchain's libIndexStore: `XTALK_LIBINDEXSTORE`, else beside the `swift` that runs this build.
    static func libIndexStore() throws -> String {
        if let path = ProcessInfo.processInfo.environment["XTALK_LIBINDEXSTORE"] { return path }
        #if os(macOS)
            let (status, text) = try runTool(["xcrun", "--find", "swift"])
            let swift = status == 0 ? text.trimmingCharacters(in: .whitespacesAndNewlines) : ""
            let name = "libIndexStore.dylib"
        #else
            let (status, text) = try runTool(["sh", "-c", "command -v swift"])
            let swift = status == 0 ? text.trimmingCharacters(in: .whitespacesAndNewlines) : ""
            let name = "libIndexStore.so"
        #endif
        guard !swift.isEmpty else { throw IndexError("no swift on PATH to find libIndexStore beside") }
        let binary = URL(fileURLWithPath: swift).resolvingSymlinksInPath()
        let library = binary.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "lib/\(name)")
        guard FileManager.default.fileExists(atPath: library.path) else {
            throw IndexError("the toolchain has no \(library.path) (set XTALK_LIBINDEXSTORE)")
        }
        return library.path
    }
}

/// Gathers occurrences while the C reader walks the store.
private final class Collector {
    let testsFolder: String
    private var records: Set<String> = []
    /// Function definitions in test files: (file, line) -> (usr, name, parent name).
    private var definitions: [String: [(line: Int, usr: String, name: String, parent: String)]] = [:]
    private var contained: [String: [TestIndex.Reference]] = [:]
    private var parents: [String: String] = [:]
    private var implementations: [String: [(member: String, requirement: String)]] = [:]

    init(testsFolder: String) { self.testsFolder = testsFolder }

    func accepts(record: String, file: String) -> Bool {
        let path = URL(fileURLWithPath: file).standardizedFileURL.path
        guard path.hasPrefix(testsFolder), FileManager.default.fileExists(atPath: path) else { return false }
        return records.insert(record).inserted
    }

    private static let definition: UInt64 = 1 << 1
    private static let reference: UInt64 = 1 << 2

    func add(_ occurrence: xtalk_index_occurrence) {
        let file = URL(fileURLWithPath: String(cString: occurrence.file)).standardizedFileURL.path
        let usr = String(cString: occurrence.usr)
        if occurrence.roles & Self.definition != 0 {
            definitions[file, default: []].append(
                (Int(occurrence.line), usr, String(cString: occurrence.name), String(cString: occurrence.parent_name)))
            let parent = String(cString: occurrence.parent_usr)
            if !parent.isEmpty {
                parents[usr] = parent
                let requirement = String(cString: occurrence.override_usr)
                if !requirement.isEmpty { implementations[parent, default: []].append((usr, requirement)) }
            }
        }
        let container = String(cString: occurrence.container_usr)
        if occurrence.roles & Self.reference != 0, !container.isEmpty {
            contained[container, default: []].append(
                TestIndex.Reference(usr: usr, file: file, line: Int(occurrence.line), column: Int(occurrence.column)))
        }
    }

    func index(testFunctions: Set<TestIndex.TestDeclaration>) -> TestIndex {
        var tests: [String: TestIndex.Test] = [:]
        for declaration in testFunctions {
            for definition in definitions[declaration.file] ?? []
            where definition.line == declaration.line && definition.name.hasPrefix(declaration.baseName + "(") {
                let name = definition.parent.isEmpty ? definition.name : "\(definition.parent).\(definition.name)"
                tests[definition.usr] = TestIndex.Test(
                    name: name, file: declaration.file, line: declaration.line, conditional: declaration.conditional)
            }
        }
        return TestIndex(
            tests: tests, references: contained, parents: parents,
            implementations: implementations.mapValues { members in
                // Each member once (a declaration can be indexed with more than one relation).
                var seen: Set<String> = []
                return members.filter { seen.insert("\($0.member) \($0.requirement)").inserted }
            })
    }
}
