import Foundation

/// A JSON value, as the router reads requests (RFC 8259). A small parser of
/// our own: it keeps booleans and numbers apart on every platform (Foundation's
/// bridges them through NSNumber), bounds nesting, and is cheap per request.
package enum BridgeJSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([BridgeJSON])
    case object(BridgeJSONObject)

    package subscript(key: String) -> BridgeJSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    package var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The value as JSON text (keys sorted, numbers in Swift's shortest form).
    package var encoded: String {
        switch self {
        case .null: "null"
        case .bool(let flag): flag ? "true" : "false"
        case .number(let value):
            value.rounded() == value && abs(value) < 9e15 ? String(Int64(value)) : "\(value)"
        case .string(let text): Self.quoted(text)
        case .array(let elements): "[" + elements.map(\.encoded).joined(separator: ",") + "]"
        case .object(let members):
            "{"
                + members.dictionary.sorted { $0.key < $1.key }.map { Self.quoted($0.key) + ":" + $0.value.encoded }
                .joined(separator: ",") + "}"
        }
    }

    /// Appends `text` as a JSON string literal (no copy of its own when it needs no escape).
    package static func appendQuoted(_ text: String, to out: inout String) {
        var probe = text
        guard probe.withUTF8(needsNoEscape) else { return out += quoted(text) }
        out += "\""
        out += text
        out += "\""
    }

    /// No control character, quote or backslash (one branch-free pass).
    private static func needsNoEscape(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        var special: UInt8 = 0
        for byte in utf8 {
            special |=
                (byte < 0x20 ? 1 : 0) | (byte == UInt8(ascii: "\"") ? 1 : 0) | (byte == UInt8(ascii: "\\") ? 1 : 0)
        }
        return special == 0
    }

    /// A JSON string literal.
    package static func quoted(_ text: String) -> String {
        // Most text (hex, ids, words) needs no escape: one pass, one copy.
        var probe = text
        let plain: String? = probe.withUTF8 { utf8 in
            guard needsNoEscape(utf8) else { return nil }
            return String(unsafeUninitializedCapacity: utf8.count + 2) { out in
                out[0] = UInt8(ascii: "\"")
                _ = UnsafeMutableBufferPointer(rebasing: out[1..<utf8.count + 1]).initialize(from: utf8)
                out[utf8.count + 1] = UInt8(ascii: "\"")
                return utf8.count + 2
            }
        }
        if let plain { return plain }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The number given for the top-level key "id" in the first bytes of a
    /// request too long to keep whole (its head only): nil when the head is
    /// not an object, has no such key, or cuts its value. The head is read
    /// once, in linear time; nothing past the id's value is looked at.
    package static func leadingID(_ head: [UInt8]) -> Double? {
        var depth = 0
        var inString = false
        var escaped = false
        var expectingKey = false
        var key: [UInt8]? = nil  // the top-level key being read (its first bytes)
        var lastKey: [UInt8] = []
        var index = 0
        while index < head.count {
            let byte = head[index]
            index += 1
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                    if key != nil { key = [0, 0, 0] }  // a key with an escape is never read as "id"
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if let read = key {
                        lastKey = read
                        key = nil
                    }
                } else if var read = key, read.count < 3 {
                    read.append(byte)  // three bytes at most: enough to tell "id" from longer keys
                    key = read
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                if depth == 1 && expectingKey {
                    key = []
                    expectingKey = false
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 0 && byte != UInt8(ascii: "{") { return nil }
                depth += 1
                if depth == 1 { expectingKey = true }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth <= 0 { return nil }
            case UInt8(ascii: ","):
                if depth == 1 { expectingKey = true }
            case UInt8(ascii: ":"):
                guard depth == 1, lastKey == Array("id".utf8) else {
                    lastKey = []
                    continue
                }
                // The value: a number ends at ",", "}" or white space within the head.
                while index < head.count, [0x20, 0x09, 0x0A, 0x0D].contains(head[index]) { index += 1 }
                let start = index
                while index < head.count, !",} \t\r\n".utf8.contains(head[index]) { index += 1 }
                guard index < head.count, index > start,
                    case .number(let value)? = try? parse(head[start..<index])
                else { return nil }
                return value
            default:
                if depth == 0 && ![0x20, 0x09, 0x0A, 0x0D].contains(byte) { return nil }
            }
        }
        return nil
    }

    /// Parses one JSON text (surrounding whitespace allowed, nothing else).
    package static func parse(_ bytes: some Collection<UInt8>) throws(BridgeJSONError) -> BridgeJSON {
        try parse(Array(bytes))
    }

    package static func parse(_ bytes: [UInt8]) throws(BridgeJSONError) -> BridgeJSON {
        var parser = Parser(bytes)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.atEnd else { throw BridgeJSONError("text after the JSON value at offset \(parser.offset)") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var offset = 0
        static let maximumDepth = 32

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { offset == bytes.count }

        mutating func skipWhitespace() {
            while offset < bytes.count {
                switch bytes[offset] {
                case 0x20, 0x09, 0x0A, 0x0D: offset += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws(BridgeJSONError) -> BridgeJSON {
            guard depth < Self.maximumDepth else { throw BridgeJSONError("nested deeper than \(Self.maximumDepth)") }
            guard offset < bytes.count else { throw BridgeJSONError("the JSON ends early") }
            switch bytes[offset] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw BridgeJSONError("unexpected character at offset \(offset)")
            }
        }

        mutating func literal(_ word: String) throws(BridgeJSONError) {
            let expected = Array(word.utf8)
            guard bytes.count - offset >= expected.count, Array(bytes[offset..<offset + expected.count]) == expected
            else { throw BridgeJSONError("unexpected character at offset \(offset)") }
            offset += expected.count
        }

        mutating func object(depth: Int) throws(BridgeJSONError) -> BridgeJSON {
            offset += 1
            var members = BridgeJSONObject()
            members.reserveCapacity(4)  // a request's objects have a handful of members: one allocation, no regrowth
            skipWhitespace()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") {
                offset += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else {
                    throw BridgeJSONError("an object key is not a string at offset \(offset)")
                }
                let key = try string()
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                skipWhitespace()
                members.set(key, try value(depth: depth + 1))
                skipWhitespace()
                guard offset < bytes.count else { throw BridgeJSONError("the JSON ends early") }
                if bytes[offset] == UInt8(ascii: ",") {
                    offset += 1
                    continue
                }
                try expect(UInt8(ascii: "}"))
                return .object(members)
            }
        }

        mutating func array(depth: Int) throws(BridgeJSONError) -> BridgeJSON {
            offset += 1
            var elements: [BridgeJSON] = []
            skipWhitespace()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") {
                offset += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try value(depth: depth + 1))
                skipWhitespace()
                guard offset < bytes.count else { throw BridgeJSONError("the JSON ends early") }
                if bytes[offset] == UInt8(ascii: ",") {
                    offset += 1
                    continue
                }
                try expect(UInt8(ascii: "]"))
                return .array(elements)
            }
        }

        mutating func expect(_ byte: UInt8) throws(BridgeJSONError) {
            guard offset < bytes.count, bytes[offset] == byte else {
                throw BridgeJSONError("expected \"\(Character(UnicodeScalar(byte)))\" at offset \(offset)")
            }
            offset += 1
        }

        mutating func string() throws(BridgeJSONError) -> String {
            offset += 1
            // The common case: no escape before the closing quote (hex, ids, names), scanned without checks.
            let begin = offset
            let fast: String? = bytes.withUnsafeBufferPointer { buffer in
                // The closing quote (memchr), then one pass over the bytes before it (vectorised).
                guard begin < buffer.count, let base = buffer.baseAddress,
                    let quote = memchr(base + begin, Int32(UInt8(ascii: "\"")), buffer.count - begin)
                else { return nil }
                let end = base.distance(to: quote.assumingMemoryBound(to: UInt8.self))
                var special: UInt8 = 0
                for byte in buffer[begin..<end] {
                    special |= (byte < 0x20 ? 1 : 0) | (byte == UInt8(ascii: "\\") ? 1 : 0) | byte >> 7
                }
                guard special == 0 else { return nil }
                offset = end + 1
                return String(decoding: buffer[begin..<end], as: UTF8.self)
            }
            if let fast { return fast }
            var scalars = String.UnicodeScalarView()
            var start = offset
            var plain = true
            var ascii = true
            while offset < bytes.count {
                let byte = bytes[offset]
                ascii = ascii && byte < 0x80
                if byte == UInt8(ascii: "\"") {
                    if plain {
                        let text: String
                        if ascii {  // (hex, ids, method names: nothing to validate)
                            let range = start..<offset
                            text = bytes.withUnsafeBufferPointer { String(decoding: $0[range], as: UTF8.self) }
                        } else {
                            guard let valid = String(validating: bytes[start..<offset], as: UTF8.self) else {
                                throw BridgeJSONError("a string is not UTF-8")
                            }
                            text = valid
                        }
                        offset += 1
                        return text
                    }
                    try appendRaw(&scalars, from: start)
                    offset += 1
                    return String(scalars)
                }
                guard byte >= 0x20 else { throw BridgeJSONError("a control character in a string at offset \(offset)") }
                if byte == UInt8(ascii: "\\") {
                    if plain {
                        plain = false
                    }
                    try appendRaw(&scalars, from: start)
                    offset += 1
                    guard offset < bytes.count else { throw BridgeJSONError("the JSON ends early") }
                    let escape = bytes[offset]
                    offset += 1
                    switch escape {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"): scalars.append(try unicodeEscape())
                    default: throw BridgeJSONError("an unknown escape at offset \(offset - 1)")
                    }
                    start = offset
                    continue
                }
                offset += 1
            }
            throw BridgeJSONError("a string does not end")
        }

        /// Appends bytes[start..<offset] (raw UTF-8) to `scalars`.
        private func appendRaw(_ scalars: inout String.UnicodeScalarView, from start: Int) throws(BridgeJSONError) {
            guard start < offset else { return }
            guard let text = String(validating: bytes[start..<offset], as: UTF8.self) else {
                throw BridgeJSONError("a string is not UTF-8")
            }
            scalars.append(contentsOf: text.unicodeScalars)
        }

        mutating func hex4() throws(BridgeJSONError) -> UInt32 {
            guard bytes.count - offset >= 4 else { throw BridgeJSONError("the JSON ends early") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[offset]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw BridgeJSONError("a bad \\u escape at offset \(offset)")
                }
                value = value << 4 | digit
                offset += 1
            }
            return value
        }

        mutating func unicodeEscape() throws(BridgeJSONError) -> Unicode.Scalar {
            let first = try hex4()
            if (0xD800...0xDBFF).contains(first) {
                guard bytes.count - offset >= 2, bytes[offset] == UInt8(ascii: "\\"),
                    bytes[offset + 1] == UInt8(ascii: "u")
                else { throw BridgeJSONError("a lone surrogate in a string") }
                offset += 2
                let second = try hex4()
                guard (0xDC00...0xDFFF).contains(second),
                    let scalar = Unicode.Scalar(0x10000 + (first - 0xD800) << 10 + (second - 0xDC00))
                else { throw BridgeJSONError("a lone surrogate in a string") }
                return scalar
            }
            guard let scalar = Unicode.Scalar(first) else { throw BridgeJSONError("a lone surrogate in a string") }
            return scalar
        }

        mutating func number() throws(BridgeJSONError) -> Double {
            let start = offset
            if bytes[offset] == UInt8(ascii: "-") { offset += 1 }
            func digits() -> Int {
                let begin = offset
                while offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) {
                    offset += 1
                }
                return offset - begin
            }
            let integer = digits()
            guard integer > 0 else { throw BridgeJSONError("a number without digits at offset \(start)") }
            if integer > 1, bytes[offset - integer] == UInt8(ascii: "0") {
                throw BridgeJSONError("a number with a leading zero at offset \(start)")
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
                offset += 1
                guard digits() > 0 else { throw BridgeJSONError("a number without digits after '.'") }
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
                offset += 1
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") {
                    offset += 1
                }
                guard digits() > 0 else { throw BridgeJSONError("a number without an exponent") }
            }
            // Integers (ids) without the C library's parser; anything else through Double's.
            if offset - start <= 15,
                !bytes[start..<offset].contains(where: { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") })
            {
                var value = 0
                for byte in bytes[start..<offset] where byte != UInt8(ascii: "-") {
                    value = value * 10 + Int(byte - 48)
                }
                return Double(bytes[start] == UInt8(ascii: "-") ? -value : value)
            }
            guard let value = Double(String(decoding: bytes[start..<offset], as: UTF8.self)), value.isFinite else {
                throw BridgeJSONError("a number out of range at offset \(start)")
            }
            return value
        }
    }
}

package struct BridgeJSONError: Error, Sendable, Hashable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A JSON object's members in their order (a request has a handful: a
/// dictionary would hash every key; one array is one allocation). The last of
/// repeated keys wins.
package struct BridgeJSONObject: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    private var members: [(key: String, value: BridgeJSON)] = []

    package init() {}

    package init(dictionaryLiteral elements: (String, BridgeJSON)...) {
        for (key, value) in elements { set(key, value) }
    }

    package subscript(key: String) -> BridgeJSON? {
        members.lastIndex { $0.key == key }.map { members[$0].value }
    }

    package mutating func set(_ key: String, _ value: BridgeJSON) {
        if let index = members.lastIndex(where: { $0.key == key }) {
            members[index].value = value
        } else {
            members.append((key, value))
        }
    }

    package var count: Int { members.count }

    /// Makes room for `count` members without regrowing.
    package mutating func reserveCapacity(_ count: Int) {
        members.reserveCapacity(count)
    }

    package var dictionary: [String: BridgeJSON] {
        Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 })
    }

    /// Equal as JSON objects are: the same members, in any order.
    package static func == (lhs: BridgeJSONObject, rhs: BridgeJSONObject) -> Bool { lhs.dictionary == rhs.dictionary }
    package func hash(into hasher: inout Hasher) { hasher.combine(dictionary) }
}
