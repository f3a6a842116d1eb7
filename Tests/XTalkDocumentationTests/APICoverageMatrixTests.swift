import Foundation
import Testing

/// "See the API coverage matrix" (seed 000): the article
/// `XTalkBleSdk.docc/APICoverageMatrix.md` lists every public symbol of seed
/// 000's types and every parameter of their functions, where each is public,
/// and tests that use it. This suite keeps it true: a symbol added,
/// removed, or named with a test that does not use it fails here. The symbols
/// come from the compiler's symbol graphs, the uses from its index store.
///
/// `XTALK_WRITE_MATRIX=1 swift test --filter APICoverageMatrixTests` rewrites
/// the rows (new symbols get the most focused tests that use them).
@Suite("Documentation: the API coverage matrix", .timeLimit(.minutes(5)))
struct APICoverageMatrixTests {
    static let article = DocumentationSnippetTests.root.appendingPathComponent(
        "Sources/XTalkBleSdk/XTalkBleSdk.docc/APICoverageMatrix.md")

    /// The platforms this build stands for: the Apple stand-in build compiles the Apple code paths.
    static var platforms: [CoverageMatrix.Platform] {
        #if canImport(SwiftUI)
            [.iOS, .macOS]
        #else
            [.Linux]
        #endif
    }

    @Test("every public symbol of seed 000's types has a row, and every row's tests use it")
    func matrixHolds() throws {
        let (check, candidates) = try Self.check()
        var text = try String(contentsOf: Self.article, encoding: .utf8)
        var matrix = try CoverageMatrix.parse(text)
        if ProcessInfo.processInfo.environment["XTALK_WRITE_MATRIX"] == "1" {
            matrix = check.regenerated(matrix, candidates: candidates)
            text = try matrix.rendered(into: text)
            try text.write(to: Self.article, atomically: true, encoding: .utf8)
        }
        #expect(check.expected.count > 200, "the graphs list seed 000's types and their members (245 rows at 1.0.0)")
        let problems = check.problems(matrix)
        let list = problems.joined(separator: "\n")
        #expect(
            problems.isEmpty,
            "\(problems.count) problems in APICoverageMatrix.md (XTALK_WRITE_MATRIX=1 rewrites its rows):\n\(list)")
    }

    @Test("the index sees what a test uses, through its helpers, and nothing else")
    func indexSeesUses() throws {
        let (check, _) = try Self.check()
        func row(_ symbol: String, _ parameter: String = "") throws -> ExpectedRow {
            try #require(check.expected.first { $0.key == CoverageMatrix.Key(symbol: symbol, parameter: parameter) })
        }
        let initializer = "XTalkScanResult.init(id:name:address:rssi:)"
        #expect(check.proves(try row(initializer), "BleModelTests.scanResult()"))
        #expect(check.proves(try row(initializer, "address"), "BleModelTests.scanResult()"))
        #expect(!check.proves(try row(initializer), "BleModelTests.errorClassification()"))
        #expect(!check.proves(try row("XTalkBleClient.teardown()"), "BleModelTests.scanResult()"))
        #expect(!check.proves(try row("XTalkBleClient.connect(id:)", "id"), "BleModelTests.scanResult()"))
        // Through a harness: AuthHarness makes the authenticator; the test type's requirements count.
        let adapter = "AuthModelTests.adapterThroughTheProtocol()"
        #expect(check.proves(try row("XTalkDeviceAuthenticator.init(transport:)"), adapter))
        #expect(
            check.proves(try row("DeviceAuthTransport.runAtCommand(_:timeoutMs:log:responseMode:)", "log"), adapter))
        #expect(!check.proves(try row("XTalkDeviceIDCodec.format(_:)"), adapter))
    }

    /// The expected rows, and the tests that use each, from this build.
    static func check() throws -> (MatrixCheck, (ExpectedRow) -> [String]) {
        var symbols: [SymbolGraphs.Symbol] = []
        for module in ["XTalkBleSdk", "XTalkDeviceAuthSdk", "XTalkSupport"] {
            symbols += try SymbolGraphs.load(module).symbols
        }
        let (expected, missing) = expectedRows(symbols)
        let index = try TestIndex.load(root: DocumentationSnippetTests.root, build: SymbolGraphs.binPath)
        var testsByName: [String: [String]] = [:]
        for (usr, test) in index.tests { testsByName[test.name, default: []].append(usr) }
        let sources = SourceCache()
        var uses: [String: [TestIndex.Reference]] = [:]
        for usr in index.tests.keys { uses[usr] = index.uses(of: usr) }
        let proves: (ExpectedRow, String) -> Bool = { want, name in
            (testsByName[name] ?? []).contains { usr in
                (uses[usr] ?? []).contains { reference in
                    guard reference.usr == want.usr else { return false }
                    // A requirement a test type implements: the SDK makes the call, with every argument.
                    guard !want.key.parameter.isEmpty, let label = want.label, !reference.implemented else {
                        return true
                    }
                    return sources.callLabels(at: reference).contains(label)
                }
            }
        }
        // How focused a test is: how many of the matrix's symbols it uses (fewer first).
        let matrixUSRs = Set(expected.map(\.usr))
        var focus: [String: Int] = [:]
        for (usr, test) in index.tests {
            focus[test.name] = Set((uses[usr] ?? []).map(\.usr)).intersection(matrixUSRs).count
        }
        let check = MatrixCheck(
            expected: expected, missingSeedMembers: missing, platforms: platforms, tests: Set(testsByName.keys),
            proves: proves, declaredOnlyElsewhere: index.isDeclaredOnlyElsewhere)
        var conditional: Set<String> = []
        for test in index.tests.values where test.conditional { conditional.insert(test.name) }
        // Whether the test's own body uses it (a better witness than a helper's use).
        let direct: (ExpectedRow, String) -> Bool = { want, name in
            (testsByName[name] ?? []).contains { usr in
                (index.references[usr] ?? []).contains { reference in
                    guard reference.usr == want.usr else { return false }
                    guard !want.key.parameter.isEmpty, let label = want.label else { return true }
                    return sources.callLabels(at: reference).contains(label)
                }
            }
        }
        let candidates: (ExpectedRow) -> [String] = { want in
            let base = String(want.key.symbol.split(separator: ".").last?.prefix { $0 != "(" } ?? "").lowercased()
            // Tests every build has first, then those whose own body uses it, then the most focused.
            func rank(_ name: String) -> (Int, Int, Int, Int, String) {
                (
                    conditional.contains(name) ? 1 : 0, direct(want, name) ? 0 : 1, focus[name] ?? 0,
                    name.lowercased().contains(base) ? 0 : 1, name
                )
            }
            return testsByName.keys.filter { proves(want, $0) }.sorted { rank($0) < rank($1) }
        }
        return (check, candidates)
    }

    /// Rows for every public member of seed 000's types (not the compiler's
    /// synthesized ones), and seed 000's members this build lacks.
    static func expectedRows(_ symbols: [SymbolGraphs.Symbol]) -> (rows: [ExpectedRow], missingSeed: [String]) {
        var rows: [ExpectedRow] = []
        var realized: Set<String> = []
        let present = Set(symbols.map(\.path))
        for symbol in symbols where !symbol.isSynthesized && !symbol.components.isEmpty {
            let type = symbol.components[0]
            guard let typeIndex = Seed000.types.firstIndex(of: type) else { continue }
            let member = symbol.components.dropFirst().joined(separator: ".")
            let seedMembers = Seed000.members[type] ?? []
            // A seed member is realized by this symbol when the names match or, when no symbol has
            // its name, the base names match and the seed's labels begin this symbol's (defaulted
            // parameters added after them).
            let seedIndex: Int? =
                member.isEmpty
                ? -1
                : seedMembers.firstIndex(of: member)
                    ?? seedMembers.firstIndex {
                        !present.contains("\(type).\($0)") && baseName($0) == baseName(member)
                            && labels(member).starts(with: labels($0)) && labels($0).count < labels(member).count
                    }
            if let seedIndex { realized.insert(seedIndex < 0 ? type : "\(type).\(seedMembers[seedIndex])") }
            let path = symbol.components.joined(separator: ".")
            let order = [typeIndex, seedIndex ?? seedMembers.count]
            rows.append(
                ExpectedRow(
                    key: CoverageMatrix.Key(symbol: path, parameter: ""), kind: kindName(symbol.kind),
                    seed: seedIndex != nil, usr: symbol.precise, label: nil, order: order + [-1]))
            let seedLabels = seedIndex.flatMap { $0 >= 0 ? labels(seedMembers[$0]) : nil } ?? []
            for (position, (label, name)) in zip(labels(member), symbol.parameters).enumerated() {
                rows.append(
                    ExpectedRow(
                        key: CoverageMatrix.Key(symbol: path, parameter: label == "_" ? "_ \(name)" : label),
                        kind: "parameter", seed: seedIndex != nil && position < seedLabels.count, usr: symbol.precise,
                        label: label == "_" ? nil : label, order: order + [position]))
            }
        }
        var missing = Seed000.types.filter { !realized.contains($0) }
        for type in Seed000.types {
            missing += (Seed000.members[type] ?? []).map { "\(type).\($0)" }.filter { !realized.contains($0) }
        }
        return (rows, missing)
    }

    /// `f(a:_:)` → `f`.
    static func baseName(_ member: String) -> Substring { member.prefix { $0 != "(" } }

    /// `f(a:_:)` → `["a", "_"]`; a property or case without a list → `[]`.
    static func labels(_ member: String) -> [String] {
        guard let open = member.firstIndex(of: "("), member.hasSuffix(")") else { return [] }
        return member[member.index(after: open)..<member.index(before: member.endIndex)].split(separator: ":").map(
            String.init)
    }

    static func kindName(_ identifier: String) -> String {
        switch identifier {
        case "swift.class": "class"
        case "swift.struct": "struct"
        case "swift.enum": "enum"
        case "swift.protocol": "protocol"
        case "swift.enum.case": "case"
        case "swift.property": "property"
        case "swift.type.property": "static property"
        case "swift.method": "method"
        case "swift.type.method": "static method"
        case "swift.init": "initializer"
        case "swift.subscript": "subscript"
        case "swift.typealias": "type alias"
        default: identifier
        }
    }

    // MARK: The checker itself

    /// A fixture: two symbols of a seed type (one a function with a labelled parameter), one test using each.
    static func fixture() -> MatrixCheck {
        let key = CoverageMatrix.Key.init(symbol:parameter:)
        let expected = [
            ExpectedRow(
                key: key("XTalkAtEncoding.plain", ""), kind: "case", seed: true, usr: "u1", label: nil,
                order: [4, 0, -1]),
            ExpectedRow(
                key: key("XTalkBleClient.fetchBatteryLevel(timeoutMs:)", ""), kind: "method", seed: true, usr: "u2",
                label: nil, order: [0, 1, -1]),
            ExpectedRow(
                key: key("XTalkBleClient.fetchBatteryLevel(timeoutMs:)", "timeoutMs"), kind: "parameter", seed: true,
                usr: "u2", label: "timeoutMs", order: [0, 1, 0]),
        ]
        // T.a() uses .plain; T.b() calls fetchBatteryLevel without the label; T.c() with it.
        let uses: [String: Set<String>] = ["T.a()": ["u1"], "T.b()": ["u2"], "T.c()": ["u2", "u2:timeoutMs"]]
        return MatrixCheck(
            expected: expected, missingSeedMembers: [], platforms: [.Linux], tests: Set(uses.keys),
            proves: { want, test in
                uses[test]?.contains(want.label.map { "\(want.usr):\($0)" } ?? want.usr) == true
            })
    }

    static func fixtureRow(_ symbol: String, _ parameter: String = "", kind: String, tests: [String])
        -> CoverageMatrix.Row
    {
        CoverageMatrix.Row(
            symbol: symbol, parameter: parameter, kind: kind, seed: true,
            platforms: [.iOS: true, .macOS: true, .Linux: true], tests: tests)
    }

    static let goodFixture = CoverageMatrix(rows: [
        fixtureRow("XTalkBleClient.fetchBatteryLevel(timeoutMs:)", kind: "method", tests: ["T.b()"]),
        fixtureRow("XTalkBleClient.fetchBatteryLevel(timeoutMs:)", "timeoutMs", kind: "parameter", tests: ["T.c()"]),
        fixtureRow("XTalkAtEncoding.plain", kind: "case", tests: ["T.a()"]),
    ])

    @Test("the checker passes a true matrix, survives its own rendering, and flags every kind of drift")
    func checkerFlagsDrift() throws {
        let check = Self.fixture()
        #expect(check.problems(Self.goodFixture) == [])
        // Rendered and parsed back: the same rows.
        let article = "Intro\n\n\(CoverageMatrix.begin)\n\(CoverageMatrix.end)\n\nEnd\n"
        let rendered = try Self.goodFixture.rendered(into: article)
        #expect(try CoverageMatrix.parse(rendered).rows == Self.goodFixture.rows)
        #expect(rendered.hasPrefix("Intro") && rendered.hasSuffix("End\n"))

        var missing = Self.goodFixture
        missing.rows.removeLast()
        #expect(check.problems(missing) == ["XTalkAtEncoding.plain is public API without a row"])

        var extra = Self.goodFixture
        extra.rows.append(Self.fixtureRow("XTalkAtEncoding.gone", kind: "case", tests: ["T.a()"]))
        #expect(check.problems(extra) == ["XTalkAtEncoding.gone has a row but is not public on Linux"])

        var otherPlatform = extra
        otherPlatform.rows[3].platforms[.Linux] = false
        #expect(check.problems(otherPlatform) == [], "a row for another platform's symbol is not this build's")

        var untested = Self.goodFixture
        untested.rows[2].tests = []
        #expect(check.problems(untested) == ["XTalkAtEncoding.plain names no test"])

        var wrongTest = Self.goodFixture
        wrongTest.rows[2].tests = ["T.b()"]
        #expect(check.problems(wrongTest) == ["XTalkAtEncoding.plain: T.b() does not use it"])

        var noLabel = Self.goodFixture
        noLabel.rows[1].tests = ["T.b()"]
        #expect(
            check.problems(noLabel) == [
                "XTalkBleClient.fetchBatteryLevel(timeoutMs:) parameter timeoutMs: "
                    + "T.b() does not use it (a call with timeoutMs:)"
            ])

        var unknownTest = Self.goodFixture
        unknownTest.rows[0].tests = ["T.z()"]
        #expect(
            check.problems(unknownTest) == [
                "XTalkBleClient.fetchBatteryLevel(timeoutMs:) names no test that this build has",
                "XTalkBleClient.fetchBatteryLevel(timeoutMs:): there is no test T.z()",
            ])

        var notSeed = Self.goodFixture
        notSeed.rows[0].seed = false
        #expect(
            check.problems(notSeed) == [
                "XTalkBleClient.fetchBatteryLevel(timeoutMs:) is in seed 000, the row says otherwise"
            ])

        var twice = Self.goodFixture
        twice.rows.append(twice.rows[0])
        #expect(check.problems(twice) == ["XTalkBleClient.fetchBatteryLevel(timeoutMs:) has two rows"])

        // A test only another build has is that build's to check; one no source declares is an error.
        var elsewhere = check
        elsewhere.declaredOnlyElsewhere = { $0 == "T.apple()" }
        var conditional = Self.goodFixture
        conditional.rows[2].tests = ["T.a()", "T.apple()"]
        #expect(elsewhere.problems(conditional) == [])
        conditional.rows[2].tests = ["T.apple()"]
        #expect(elsewhere.problems(conditional) == ["XTalkAtEncoding.plain names no test that this build has"])
        conditional.rows[2].tests = ["T.a()", "T.typo()"]
        #expect(elsewhere.problems(conditional) == ["XTalkAtEncoding.plain: there is no test T.typo()"])

        let lost = MatrixCheck(
            expected: check.expected, missingSeedMembers: ["XTalkBleClient.stopScan()"], platforms: [.Linux],
            tests: check.tests, proves: check.proves)
        #expect(
            lost.problems(Self.goodFixture) == ["seed 000's XTalkBleClient.stopScan() is not public API in this build"])

        // Regenerating repairs every one of them.
        for broken in [missing, extra, untested, wrongTest, noLabel, unknownTest, notSeed] {
            let repaired = check.regenerated(broken) { want in check.tests.sorted().filter { check.proves(want, $0) } }
            #expect(check.problems(repaired) == [], "\(repaired.rows)")
        }
    }

    @Test("seed 000's members are found when realized with defaulted parameters added after the seed's")
    func seedMembersRealized() {
        func symbol(_ components: [String], _ kind: String, _ parameters: [String] = []) -> SymbolGraphs.Symbol {
            SymbolGraphs.Symbol(
                path: components.joined(separator: "."), kind: kind, precise: components.joined(), docLines: [],
                docModule: nil, components: components, parameters: parameters)
        }
        let symbols = [
            symbol(["XTalkDeviceIDCodec"], "swift.enum"),
            symbol(["XTalkDeviceIDCodec", "format(_:extra:)"], "swift.type.method", ["raw", "extra"]),
            symbol(["XTalkDeviceIDCodec", "parse(_:)"], "swift.type.method", ["raw"]),
            symbol(["XTalkDeviceIDCodec", "parse(_:strict:)"], "swift.type.method", ["raw", "strict"]),
        ]
        let (rows, missing) = Self.expectedRows(symbols)
        #expect(missing.contains("XTalkDeviceIDCodec.canonicalize(_:)"))
        #expect(!missing.contains("XTalkDeviceIDCodec.format(_:)") && !missing.contains("XTalkDeviceIDCodec"))
        let format = rows.filter { $0.key.symbol == "XTalkDeviceIDCodec.format(_:extra:)" }
        #expect(format.map(\.key.parameter) == ["", "_ raw", "extra"])
        #expect(format.map(\.seed) == [true, true, false], "the added parameter is an addition")
        #expect(format.map(\.label) == [nil, nil, "extra"])
        let strict = rows.first { $0.key.symbol == "XTalkDeviceIDCodec.parse(_:strict:)" && $0.key.parameter.isEmpty }
        #expect(strict?.seed == false, "a seed member realized by its own name is not realized again by an overload")
    }

    @Test("call labels are read from the source: nested calls, strings and trailing closures")
    func callLabels() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xtalk-labels-\(UUID().uuidString).swift")
        defer { try? FileManager.default.removeItem(at: file) }
        try """
        let a = try await client.runAtCommand("AT+X=(1,2)", timeoutMs: min(3, 4), log: false)
        let b = client.fetchBatteryLevel()
        client.withExclusiveAtSession { session in try await session.runAtCommand("x:y", responseMode: .automatic) }
        """.write(to: file, atomically: true, encoding: .utf8)
        let sources = SourceCache()
        func labels(_ line: Int, _ column: Int) -> [String] {
            sources.callLabels(at: TestIndex.Reference(usr: "", file: file.path, line: line, column: column))
        }
        #expect(labels(1, 26) == ["timeoutMs", "log"])
        #expect(labels(2, 16) == [])
        #expect(labels(3, 62) == ["responseMode"])
        #expect(labels(3, 8) == [], "a trailing closure has no label")
    }
}

/// Test sources, read once each, and the argument labels of a call.
final class SourceCache: @unchecked Sendable {
    private var files: [String: [[UInt8]]] = [:]
    private let lock = NSLock()

    private func lines(_ file: String) -> [[UInt8]] {
        lock.lock()
        defer { lock.unlock() }
        if let lines = files[file] { return lines }
        let data = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { Array($0) }
        files[file] = lines
        return lines
    }

    /// The labels of the call whose callee's name starts at `reference`
    /// (line and UTF-8 column, 1-based): those of its parenthesised arguments.
    func callLabels(at reference: TestIndex.Reference) -> [String] {
        let lines = lines(reference.file)
        guard reference.line >= 1, reference.line <= lines.count else { return [] }
        // The text from the name on (a call may span lines).
        var text = Array(lines[reference.line - 1].dropFirst(max(0, reference.column - 1)))
        for line in lines.dropFirst(reference.line).prefix(60) { text += [UInt8(ascii: "\n")] + line }
        func isIdentifier(_ byte: UInt8) -> Bool {
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x5F
                || byte >= 0x80
        }
        var index = 0
        while index < text.count, isIdentifier(text[index]) { index += 1 }
        while index < text.count, text[index] == UInt8(ascii: " ") { index += 1 }
        guard index < text.count, text[index] == UInt8(ascii: "(") else { return [] }
        var labels: [String] = []
        var depth = 0
        var argumentStart = true
        while index < text.count {
            let byte = text[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                while index < text.count, text[index] != UInt8(ascii: "\"") {
                    if text[index] == UInt8(ascii: "\\") { index += 1 }
                    index += 1
                }
            case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                argumentStart = depth == 1
            case UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
                if depth == 0 { return labels }
            case UInt8(ascii: ","):
                argumentStart = depth == 1
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\t"):
                break
            default:
                if argumentStart, isIdentifier(byte) {
                    var end = index
                    while end < text.count, isIdentifier(text[end]) { end += 1 }
                    var after = end
                    while after < text.count, text[after] == UInt8(ascii: " ") { after += 1 }
                    if after < text.count, text[after] == UInt8(ascii: ":"),
                        after + 1 >= text.count || text[after + 1] != UInt8(ascii: ":")
                    {
                        labels.append(String(decoding: text[index..<end], as: UTF8.self))
                    }
                    index = end - 1
                }
                argumentStart = false
            }
            index += 1
        }
        return labels
    }
}
