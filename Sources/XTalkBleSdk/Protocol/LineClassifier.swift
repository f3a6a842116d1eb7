import Foundation

/// What a decoded line means (PROTOCOL.md sections 5 and 6).
///
/// URC prefixes are reserved: a line with one of them is never part of a
/// command's response, even when its fields are malformed.
enum LineClass: Equatable, Sendable {
    /// A radio frame: payload and metadata (`+DI:`).
    case radioFrame(Data, XTalkDiMeta)
    /// A `+DI:` line whose fields break a rule; delivered as `.atLine` only.
    case malformedRadioFrame(reason: String)
    /// A CRC failure report (`+CRCERR:`).
    case crcError(XTalkDiMeta)
    /// A `+CRCERR:` line whose fields break a rule; delivered as `.atLine` only.
    case malformedCrcError(reason: String)
    /// `+SENDFIN:OK` (`failure == nil`) or `+SENDFIN:FAIL,<reason>`; any other
    /// `+SENDFIN:` text is a failure whose reason is that text.
    case sendFinished(failure: String?)
    /// `+READY`: the radio MCU (re)started.
    case ready
    /// Any other line: a candidate response line.
    case response(FinalResultCode?)

    /// True for the unsolicited result codes, which never enter a response.
    var isUnsolicited: Bool {
        switch self {
        case .radioFrame, .malformedRadioFrame, .crcError, .malformedCrcError, .sendFinished, .ready: true
        case .response: false
        }
    }
}

/// A final result code ends an `.automatic` command; it is part of the response.
enum FinalResultCode: Equatable, Sendable {
    case ok
    /// `ERROR`, `+CME ERROR:…` or `+ERR:…`.
    case error
}

package enum LineClassifier {
    /// Whether `line` is a final result code that reports an error (`ERROR`,
    /// `+CME ERROR:…`, `+ERR:…`): how a tool tells a refused command.
    package static func isErrorResult(_ line: String) -> Bool {
        if case .response(.error) = classify(line) { true } else { false }
    }

    static func classify(_ line: String) -> LineClass {
        // Lines from the framer are native ASCII strings: contiguous, read in place.
        if let result = line.utf8.withContiguousStorageIfAvailable({ classify(utf8: $0) }) { return result }
        var copy = line
        return copy.withUTF8 { classify(utf8: $0) }
    }

    static func classify(utf8 line: UnsafeBufferPointer<UInt8>) -> LineClass {
        if line.first == UInt8(ascii: "+") {
            if hasPrefix(line, "+DI:") {
                switch DiFieldParser.parse(UnsafeBufferPointer(rebasing: line[4...]), expectPayload: true) {
                case .success(let frame): return .radioFrame(frame.payload, frame.meta)
                case .failure(let problem): return .malformedRadioFrame(reason: problem.reason)
                }
            }
            if hasPrefix(line, "+CRCERR:") {
                // A report without fields is still a report: every meta field absent.
                if line.count == 8 { return .crcError(XTalkDiMeta()) }
                switch DiFieldParser.parse(UnsafeBufferPointer(rebasing: line[8...]), expectPayload: false) {
                case .success(let frame): return .crcError(frame.meta)
                case .failure(let problem): return .malformedCrcError(reason: problem.reason)
                }
            }
            if hasPrefix(line, "+SENDFIN:") {
                let rest = String(decoding: UnsafeBufferPointer(rebasing: line[9...]), as: UTF8.self)
                if rest == "OK" { return .sendFinished(failure: nil) }
                if rest.hasPrefix("FAIL,") { return .sendFinished(failure: String(rest.dropFirst(5))) }
                return .sendFinished(failure: rest)
            }
            if hasPrefix(line, "+READY") { return .ready }
            if hasPrefix(line, "+CME ERROR:") || hasPrefix(line, "+ERR:") { return .response(.error) }
            return .response(nil)
        }
        if equals(line, "OK") { return .response(.ok) }
        if equals(line, "ERROR") { return .response(.error) }
        return .response(nil)
    }

    @inline(__always)
    private static func hasPrefix(_ line: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard line.count >= count else { return false }
        let p = prefix.utf8Start
        for i in 0..<count where line[i] != p[i] { return false }
        return true
    }

    @inline(__always)
    private static func equals(_ line: UnsafeBufferPointer<UInt8>, _ text: StaticString) -> Bool {
        line.count == text.utf8CodeUnitCount && hasPrefix(line, text)
    }
}

/// A reason a `+DI:`/`+CRCERR:` line is malformed.
struct DiFieldProblem: Error, Equatable {
    var reason: String
}

/// The `key=value` field rules of PROTOCOL.md section 5.
///
/// Fields are comma-separated, in any order. Known keys must hold a decimal
/// integer (an optional `-`, then digits, within `Int`); a known key given
/// twice is ambiguous and malformed; unknown keys are ignored. For `+DI:`,
/// `data` must be non-empty, even-length hex of either case, and `len`, when
/// present, must equal the decoded length. For `+CRCERR:`, `data` is an
/// unknown key.
enum DiFieldParser {
    struct Frame: Equatable {
        var meta: XTalkDiMeta
        var payload: Data
    }

    private enum Key: Int, CaseIterable {
        case cnt, len, slot, snr, rssi, lsnr, lrssi, rsnr, rrssi, txp
    }

    /// One optional value per key, on the stack (no array per line).
    private struct Values {
        private var storage: (Int?, Int?, Int?, Int?, Int?, Int?, Int?, Int?, Int?, Int?) =
            (nil, nil, nil, nil, nil, nil, nil, nil, nil, nil)

        subscript(_ index: Int) -> Int? {
            get {
                switch index {
                case 0: storage.0
                case 1: storage.1
                case 2: storage.2
                case 3: storage.3
                case 4: storage.4
                case 5: storage.5
                case 6: storage.6
                case 7: storage.7
                case 8: storage.8
                default: storage.9
                }
            }
            set {
                switch index {
                case 0: storage.0 = newValue
                case 1: storage.1 = newValue
                case 2: storage.2 = newValue
                case 3: storage.3 = newValue
                case 4: storage.4 = newValue
                case 5: storage.5 = newValue
                case 6: storage.6 = newValue
                case 7: storage.7 = newValue
                case 8: storage.8 = newValue
                default: storage.9 = newValue
                }
            }
        }
    }

    static func parse(_ fields: UnsafeBufferPointer<UInt8>, expectPayload: Bool) -> Result<Frame, DiFieldProblem> {
        var values = Values()
        var payload: Data? = nil
        var start = 0
        let end = fields.count
        if end == 0 { return .failure(DiFieldProblem(reason: "no fields")) }
        guard let base = fields.baseAddress else { return .failure(DiFieldProblem(reason: "no fields")) }
        while start <= end {
            // memchr: the data field is long, and this is the hottest loop of the receive path.
            let comma = start < end ? memchr(base + start, Int32(UInt8(ascii: ",")), end - start) : nil
            let stop = comma.map { UnsafeRawPointer($0) - UnsafeRawPointer(base) } ?? end
            let field = UnsafeBufferPointer(rebasing: fields[start..<stop])
            guard let equals = field.firstIndex(of: UInt8(ascii: "=")) else {
                return .failure(DiFieldProblem(reason: "field '\(text(field))' has no '='"))
            }
            if equals == 0 { return .failure(DiFieldProblem(reason: "a field has an empty key")) }
            let keyBytes = UnsafeBufferPointer(rebasing: field[0..<equals])
            let value = UnsafeBufferPointer(rebasing: field[(equals + 1)...])
            if expectPayload && matches(keyBytes, "data") {
                if payload != nil { return .failure(DiFieldProblem(reason: "'data' appears twice")) }
                guard !value.isEmpty else { return .failure(DiFieldProblem(reason: "'data' is empty")) }
                guard let bytes = Hex.decodeData(value) else {
                    return .failure(DiFieldProblem(reason: "'data' is not even-length hex"))
                }
                payload = bytes
            } else if let key = key(keyBytes) {
                if values[key.rawValue] != nil {
                    return .failure(DiFieldProblem(reason: "'\(text(keyBytes))' appears twice"))
                }
                guard let number = integer(value) else {
                    return .failure(DiFieldProblem(reason: "'\(text(keyBytes))' is not a decimal integer"))
                }
                values[key.rawValue] = number
            }
            start = stop + 1
        }
        let meta = XTalkDiMeta(
            diCnt: values[Key.cnt.rawValue], len: values[Key.len.rawValue], slot: values[Key.slot.rawValue],
            snr: values[Key.snr.rawValue], rssi: values[Key.rssi.rawValue],
            localSnr: values[Key.lsnr.rawValue], localRssi: values[Key.lrssi.rawValue],
            remoteSnr: values[Key.rsnr.rawValue], remoteRssi: values[Key.rrssi.rawValue],
            txp: values[Key.txp.rawValue])
        guard expectPayload else { return .success(Frame(meta: meta, payload: Data())) }
        guard let payload else { return .failure(DiFieldProblem(reason: "no 'data' field")) }
        if let len = meta.len, len != payload.count {
            return .failure(DiFieldProblem(reason: "'len' is \(len) but 'data' holds \(payload.count) bytes"))
        }
        return .success(Frame(meta: meta, payload: payload))
    }

    private static func key(_ bytes: UnsafeBufferPointer<UInt8>) -> Key? {
        // Dispatch on length and first letter: at most one comparison per field.
        guard let first = bytes.first else { return nil }
        let candidate: (Key, StaticString)?
        switch (bytes.count, first) {
        case (3, UInt8(ascii: "c")): candidate = (.cnt, "cnt")
        case (3, UInt8(ascii: "l")): candidate = (.len, "len")
        case (3, UInt8(ascii: "s")): candidate = (.snr, "snr")
        case (3, UInt8(ascii: "t")): candidate = (.txp, "txp")
        case (4, UInt8(ascii: "s")): candidate = (.slot, "slot")
        case (4, UInt8(ascii: "l")): candidate = (.lsnr, "lsnr")
        case (4, UInt8(ascii: "r")):
            candidate =
                bytes[1] == UInt8(ascii: "s") && bytes[2] == UInt8(ascii: "s")
                ? (.rssi, "rssi") : (.rsnr, "rsnr")
        case (5, UInt8(ascii: "l")): candidate = (.lrssi, "lrssi")
        case (5, UInt8(ascii: "r")): candidate = (.rrssi, "rrssi")
        default: candidate = nil
        }
        guard let (key, text) = candidate, matches(bytes, text) else { return nil }
        return key
    }

    @inline(__always)
    private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        let p = text.utf8Start
        for i in 0..<bytes.count where bytes[i] != p[i] { return false }
        return true
    }

    /// An optional `-` and 1+ decimal digits that fit in `Int`; nil otherwise.
    private static func integer(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < bytes.count else { return nil }
        var value = 0
        while index < bytes.count {
            let digit = bytes[index] &- 0x30
            guard digit <= 9 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) =
                negative
                ? times10.subtractingReportingOverflow(Int(digit))
                : times10.addingReportingOverflow(Int(digit))
            if o1 || o2 { return nil }
            value = next
            index += 1
        }
        return value
    }

    private static func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}
