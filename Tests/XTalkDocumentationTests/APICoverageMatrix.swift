import Foundation

/// Seed 000 (the customer's iOS API reference, SDK 1.0.0) as symbol-graph
/// paths, transcribed once: the seeds' public names and signatures never
/// change, so this list only grows with a new seed.
enum Seed000 {
    /// Its types, in the reference's order (the matrix's order).
    static let types = [
        "XTalkBleClient", "XTalkScanResult", "XTalkConnectionState", "XTalkBleError", "XTalkAtEncoding",
        "XTalkAtResponseMode", "XTalkDiMeta", "XTalkBleEvent", "DeviceAuthTransport", "DeviceAuthAtEncoding",
        "DeviceAuthResponseMode", "XTalkDeviceAuthenticator", "XTalkDeviceAuthConfiguration", "XTalkDeviceAuthResult",
        "XTalkDeviceAuthState", "XTalkDeviceAuthError", "XTalkDeviceIdentity", "XTalkDeviceIdentitySource",
        "XTalkDeviceIDCodec",
    ]

    /// Every member it names. A function's parameters are its labels here;
    /// an implementation may add defaulted parameters after them.
    static let members: [String: [String]] = [
        "XTalkBleClient": [
            "init()", "connectionState", "scanResults", "connectedName", "connectedAddress", "connectedPeripheralId",
            "atReady", "deviceControlReady", "atEncoding", "events", "onEvent", "startScan()", "stopScan()",
            "connect(id:)", "disconnect()", "teardown()", "setAtEncoding(_:)",
            "runAtCommand(_:timeoutMs:log:responseMode:)", "sendAtCommandNoWait(_:)", "withExclusiveAtSession(_:)",
            "sendRfPayload(_:timeoutMs:)", "sendRfPayloadNoWait(_:)", "fetchBatteryLevel(timeoutMs:)",
            "fetchBleFirmwareVersion(timeoutMs:)", "fetchHardwareVersion(timeoutMs:)", "observeAtLines(_:)",
            "removeAtLineObserver(_:)", "observeSendFinishLines(_:)", "removeSendFinishLineObserver(_:)",
            "observePassthroughRaw(_:)", "removePassthroughRawObserver(_:)",
        ],
        // (With the fields the reference's initializers take, which its text and the guides' code read.)
        "XTalkScanResult": ["init(id:name:address:rssi:)", "displayName", "id", "name", "address", "rssi"],
        "XTalkConnectionState": ["idle", "scanning", "connecting", "connected", "disconnected", "failed(_:)"],
        "XTalkBleError": [
            "bluetoothUnavailable", "permissionDenied", "scanFailed(_:)", "deviceNotFound(_:)", "deviceMismatch(_:)",
            "connectionFailed(_:)", "serviceMissing", "characteristicMissing", "notConnected", "notReady", "busy",
            "timeout", "writeFailed(_:)", "cancelled", "malformedResponse(_:)", "deviceControlFailed(_:)",
        ],
        "XTalkAtEncoding": ["plain", "xor"],
        "XTalkAtResponseMode": ["automatic", "collectUntilTimeout"],
        "XTalkDiMeta": [
            "diCnt", "len", "slot", "snr", "rssi", "localSnr", "localRssi", "remoteSnr", "remoteRssi", "txp",
            "init(diCnt:len:slot:snr:rssi:localSnr:localRssi:remoteSnr:remoteRssi:txp:)",
        ],
        "XTalkBleEvent": [
            "connectionStateChanged(_:)", "atLine(_:)", "sendFinished", "diPayload(_:_:)", "crcError(_:_:)",
            "passthroughRaw(_:)",
        ],
        "DeviceAuthTransport": [
            "label", "atEncoding", "setAtEncoding(_:)", "runAtCommand(_:timeoutMs:log:responseMode:)",
        ],
        "DeviceAuthAtEncoding": ["plain", "xor"],
        "DeviceAuthResponseMode": ["automatic", "collectFullWindow", "recoverableEncodingProbe"],
        "XTalkDeviceAuthenticator": ["state", "init(transport:)", "authenticate(configuration:)", "cancel()"],
        "XTalkDeviceAuthConfiguration": [
            "init(probeTimeoutMs:strictProbeTimeoutMs:challengeTimeoutMs:identityTimeoutMs:maxChallengeAttempts:)"
        ],
        "XTalkDeviceAuthResult": [
            "identity", "encoding", "didRequireChallenge", "init(identity:encoding:didRequireChallenge:)",
        ],
        "XTalkDeviceAuthState": [
            "idle", "probing", "challenging(attempt:maxAttempts:)", "readingIdentity", "authenticated(_:)",
            "failed(_:)",
            "cancelled",
        ],
        "XTalkDeviceAuthError": [
            "busy", "invalidConfiguration", "transportUnavailable", "commandTimedOut(_:)", "secureRandomUnavailable",
            "invalidChallenge", "challengeMissing", "malformedChallengeReply", "invalidSignatureLength(_:)",
            "signatureVerificationFailed", "challengeRetryExhausted", "invalidDeviceIdentity", "cancelled",
        ],
        "XTalkDeviceIdentity": ["init(deviceID:did:serial:source:)", "deviceID", "did", "serial", "source"],
        "XTalkDeviceIdentitySource": ["efuseSn", "sn"],
        "XTalkDeviceIDCodec": ["canonicalize(_:)", "fromSn(year:week:serial:)", "parse(_:)", "format(_:)"],
    ]
}

/// The API coverage matrix: one row per public symbol of seed 000's types
/// (and per parameter of their functions), where it is available, and the
/// tests whose bodies use it.
struct CoverageMatrix {
    enum Platform: String, CaseIterable, Hashable {
        case iOS, macOS, Linux
    }

    struct Row: Hashable {
        var symbol: String
        /// The parameter's label (`_ name` when it has none), or "" for the symbol itself.
        var parameter: String
        var kind: String
        var seed: Bool
        var platforms: [Platform: Bool]
        var tests: [String]
        var key: Key { Key(symbol: symbol, parameter: parameter) }
    }

    struct Key: Hashable, Comparable {
        let symbol: String
        let parameter: String
        static func < (a: Key, b: Key) -> Bool { (a.symbol, a.parameter) < (b.symbol, b.parameter) }
    }

    static let begin = "<!-- matrix:begin (generated rows; see APICoverageMatrixTests) -->"
    static let end = "<!-- matrix:end -->"
    static let header = [
        "| Symbol | Parameter | Kind | In the reference | iOS | macOS | Linux | Tests that use it |",
        "|---|---|---|---|---|---|---|---|",
    ]

    var rows: [Row]

    /// The rows between the markers of the article's text.
    static func parse(_ text: String) throws -> CoverageMatrix {
        guard let start = text.range(of: begin), let stop = text.range(of: end), start.upperBound <= stop.lowerBound
        else { throw MatrixError("the article has no \(begin) … \(end) section") }
        var rows: [Row] = []
        for line in text[start.upperBound..<stop.lowerBound].split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 8 else { throw MatrixError("a row without 8 cells: \(line)") }
            func code(_ cell: String) -> String { cell.trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
            var platforms: [Platform: Bool] = [:]
            for (index, platform) in Platform.allCases.enumerated() { platforms[platform] = cells[4 + index] == "✓" }
            let tests = cells[7].split(separator: ",").map { code($0.trimmingCharacters(in: .whitespaces)) }
                .filter { !$0.isEmpty }
            rows.append(
                Row(
                    symbol: code(cells[0]), parameter: code(cells[1]), kind: cells[2], seed: cells[3] == "seed",
                    platforms: platforms, tests: tests))
        }
        return CoverageMatrix(rows: rows)
    }

    /// The article's text with its rows replaced by these.
    func rendered(into text: String) throws -> String {
        guard let start = text.range(of: Self.begin), let stop = text.range(of: Self.end) else {
            throw MatrixError("the article has no \(Self.begin) … \(Self.end) section")
        }
        var lines = [""] + Self.header
        for row in rows {
            let platforms = Platform.allCases.map { row.platforms[$0] == true ? "✓" : "—" }
            let cells =
                [
                    "`\(row.symbol)`", row.parameter.isEmpty ? "" : "`\(row.parameter)`", row.kind,
                    row.seed ? "seed" : "addition",
                ]
                + platforms + [row.tests.map { "`\($0)`" }.joined(separator: ", ")]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        lines.append("")
        return String(text[..<start.upperBound]) + lines.joined(separator: "\n") + String(text[stop.lowerBound...])
    }
}

/// A row this build says must be in the matrix.
struct ExpectedRow: Hashable {
    let key: CoverageMatrix.Key
    let kind: String
    let seed: Bool
    /// The USR a test must refer to (a parameter's: its function's).
    let usr: String
    /// For a parameter row: the argument label a call must carry (nil: the parameter has none).
    let label: String?
    /// Where it sorts: the seed type's position, then the member's, then the parameter's.
    let order: [Int]
}

struct MatrixError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What the matrix must say in this build, and whether a test proves a row.
struct MatrixCheck {
    let expected: [ExpectedRow]
    /// Seed 000's members this build does not have (each one is a problem).
    let missingSeedMembers: [String]
    /// The platforms this build stands for.
    let platforms: [CoverageMatrix.Platform]
    /// Every test's name.
    let tests: Set<String>
    /// Whether `test` (a name) proves `row`.
    let proves: (ExpectedRow, String) -> Bool
    /// Whether a test of this name is in the sources but not in this build
    /// (inside an `#if`): the build that has it checks it.
    var declaredOnlyElsewhere: (String) -> Bool = { _ in false }

    /// Everything wrong with `matrix`, one sentence each.
    func problems(_ matrix: CoverageMatrix) -> [String] {
        var problems = missingSeedMembers.map { "seed 000's \($0) is not public API in this build" }
        var byKey: [CoverageMatrix.Key: CoverageMatrix.Row] = [:]
        for row in matrix.rows {
            if byKey.updateValue(row, forKey: row.key) != nil { problems.append("\(describe(row.key)) has two rows") }
        }
        let expectedKeys = Set(expected.map(\.key))
        for want in expected {
            guard let row = byKey[want.key] else {
                problems.append("\(describe(want.key)) is public API without a row")
                continue
            }
            if row.kind != want.kind {
                problems.append("\(describe(want.key)) is a \(want.kind), the row says \(row.kind)")
            }
            if row.seed != want.seed {
                problems.append(
                    "\(describe(want.key)) is \(want.seed ? "" : "not ")in seed 000, the row says otherwise")
            }
            for platform in platforms where row.platforms[platform] != true {
                problems.append("\(describe(want.key)) is public on \(platform.rawValue), the row says it is not")
            }
            if row.tests.isEmpty {
                problems.append("\(describe(want.key)) names no test")
            } else if !row.tests.contains(where: tests.contains) {
                problems.append("\(describe(want.key)) names no test that this build has")
            }
            for test in row.tests {
                if !tests.contains(test) {
                    if !declaredOnlyElsewhere(test) {
                        problems.append("\(describe(want.key)): there is no test \(test)")
                    }
                } else if !proves(want, test) {
                    problems.append(
                        "\(describe(want.key)): \(test) does not use it"
                            + (want.label.map { " (a call with \($0):)" } ?? ""))
                }
            }
        }
        for row in matrix.rows where !expectedKeys.contains(row.key) {
            for platform in platforms where row.platforms[platform] == true {
                problems.append("\(describe(row.key)) has a row but is not public on \(platform.rawValue)")
            }
        }
        return problems
    }

    /// `matrix` made true for this build: rows added and removed, kinds and
    /// seed marks corrected, tests that no longer prove a row dropped and, where
    /// none is left, the most focused tests that do (up to two).
    func regenerated(_ matrix: CoverageMatrix, candidates: (ExpectedRow) -> [String]) -> CoverageMatrix {
        var byKey = Dictionary(matrix.rows.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        var rows: [(order: [Int], row: CoverageMatrix.Row)] = []
        for want in expected {
            var row =
                byKey.removeValue(forKey: want.key)
                ?? CoverageMatrix.Row(
                    symbol: want.key.symbol, parameter: want.key.parameter, kind: want.kind, seed: want.seed,
                    platforms: Dictionary(uniqueKeysWithValues: CoverageMatrix.Platform.allCases.map { ($0, true) }),
                    tests: [])
            row.kind = want.kind
            row.seed = want.seed
            for platform in platforms { row.platforms[platform] = true }
            row.tests = row.tests.filter { tests.contains($0) ? proves(want, $0) : declaredOnlyElsewhere($0) }
            if !row.tests.contains(where: tests.contains) {
                row.tests = Array(candidates(want).prefix(2)) + row.tests
            }
            rows.append((want.order, row))
        }
        // Rows of symbols public only on the other platforms stay, after their type's rows.
        for var row in byKey.values {
            for platform in platforms { row.platforms[platform] = false }
            guard CoverageMatrix.Platform.allCases.contains(where: { row.platforms[$0] == true }) else { continue }
            let type = row.symbol.split(separator: ".").first.map(String.init) ?? row.symbol
            // Where this build's expected row would sort (an addition: after the seed's members).
            let order = [
                Seed000.types.firstIndex(of: type) ?? Int.max, Seed000.members[type]?.count ?? 0,
                row.parameter.isEmpty ? -1 : 0,
            ]
            rows.append((order, row))
        }
        // Type, member, then symbol (a function's parameters follow it, in order), whichever build writes.
        rows.sort { a, b in
            let first = (a.order[0], a.order[1], a.row.symbol, a.order[2], a.row.parameter)
            let second = (b.order[0], b.order[1], b.row.symbol, b.order[2], b.row.parameter)
            return first < second
        }
        return CoverageMatrix(rows: rows.map(\.row))
    }

    private func describe(_ key: CoverageMatrix.Key) -> String {
        key.parameter.isEmpty ? key.symbol : "\(key.symbol) parameter \(key.parameter)"
    }
}
