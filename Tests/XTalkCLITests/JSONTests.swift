import Foundation
import Testing
@testable import XTalkCLI

/// The JSON text Foundation's parser must accept for `value`, as a top-level fragment.
private func parsedByFoundation(_ value: JSONValue) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(value.jsonText.utf8), options: .fragmentsAllowed)
}

/// The class Foundation uses for a parsed `true`, to tell booleans from the numbers 0 and 1.
private let booleanType: Any.Type = {
    let parsed = try? JSONSerialization.jsonObject(with: Data("true".utf8), options: .fragmentsAllowed)
    return parsed.map { type(of: $0) } ?? Bool.self
}()

/// Whether Foundation's parse of our text means the same as the value we wrote.
///
/// Object fields are compared by key (Foundation's dictionaries have no order); doubles must be within the
/// documented rounding (6 fractional digits); non-finite doubles must come back as null.
private func sameValue(_ parsed: Any, _ expected: JSONValue) -> Bool {
    let isBoolean = type(of: parsed) == booleanType
    switch expected {
    case .null:
        return parsed is NSNull
    case .bool(let value):
        return isBoolean && (parsed as? Bool) == value
    case .int(let value):
        return !isBoolean && (parsed as? NSNumber)?.int64Value == Int64(value)
    case .double(let value):
        guard value.isFinite else { return parsed is NSNull }
        guard !isBoolean, let number = (parsed as? NSNumber)?.doubleValue else { return false }
        return abs(number - value) <= 5e-7 + abs(value) * 1e-15
    case .string(let value):
        return (parsed as? String) == value
    case .array(let elements):
        guard let array = parsed as? [Any], array.count == elements.count else { return false }
        return zip(array, elements).allSatisfy { sameValue($0, $1) }
    case .object(let fields):
        guard let object = parsed as? [String: Any], object.count == fields.count else { return false }
        return fields.allSatisfy { key, value in object[key].map { sameValue($0, value) } ?? false }
    }
}

/// The `--json` encoder: escaping, number formatting, field order, and Foundation reading it back.
@Suite("JSON", .timeLimit(.minutes(5)))
struct JSONTests {}

extension JSONTests {
    @Suite("Strings")
    struct Strings {
        @Test("plain strings are quoted as is")
        func plain() {
            #expect(JSONValue.string("scan").jsonText == #""scan""#)
            #expect(JSONValue.string("").jsonText == #""""#)
            #expect(JSONValue.string("a/b <c> & 'd'").jsonText == #""a/b <c> & 'd'""#)
        }

        @Test("quote and backslash are escaped")
        func quoteAndBackslash() {
            #expect(JSONValue.string(#"say "hi""#).jsonText == #""say \"hi\"""#)
            #expect(JSONValue.string(#"C:\dir\"#).jsonText == #""C:\\dir\\""#)
            #expect(JSONValue.string(#"\""#).jsonText == #""\\\"""#)
        }

        @Test("the five control characters with a short escape use it")
        func shortEscapes() {
            #expect(JSONValue.string("\u{08}\u{0C}\n\r\t").jsonText == #""\b\f\n\r\t""#)
            #expect(JSONValue.string("OK\r\n").jsonText == #""OK\r\n""#)
        }

        /// Every control character U+0000...U+001F, with the escape RFC 8259 requires.
        static let controlCharacters: [(UInt32, String)] = (0...0x1F).map { code in
            let short: [UInt32: String] = [0x08: #"\b"#, 0x09: #"\t"#, 0x0A: #"\n"#, 0x0C: #"\f"#, 0x0D: #"\r"#]
            let digits = Array("0123456789abcdef")
            return (
                UInt32(code), short[UInt32(code)] ?? #"\u00"# + String(digits[code >> 4]) + String(digits[code & 0xF])
            )
        }

        @Test("every other control character is \\u00xx", arguments: controlCharacters)
        func controlCharacter(code: UInt32, escape: String) throws {
            let scalar = try #require(Unicode.Scalar(code))
            #expect(JSONValue.string("a" + String(Character(scalar)) + "b").jsonText == "\"a" + escape + "b\"")
        }

        @Test("a few control escapes spelled out")
        func controlExamples() {
            #expect(JSONValue.string("\u{00}").jsonText == #""\u0000""#)
            #expect(JSONValue.string("\u{1B}[0m").jsonText == #""\u001b[0m""#)
            #expect(JSONValue.string("\u{1F}").jsonText == #""\u001f""#)
            #expect(JSONValue.string("\u{0B}").jsonText == #""\u000b""#)
        }

        @Test("Unicode line separators are escaped too, so one value is always one line")
        func lineSeparators() {
            #expect(JSONValue.string("a\u{2028}b\u{2029}c\u{85}d").jsonText == #""a\u2028b\u2029c\u0085d""#)
            let text = JSONValue.string("\n\r\u{0B}\u{0C}\u{85}\u{2028}\u{2029}\r\n").jsonText
            #expect(!text.contains { $0.isNewline })
        }

        @Test(
            "non-ASCII text passes through as UTF-8",
            arguments: ["héllo", "日本語の文", "📡🔋", "👩‍👩‍👧", "e\u{301}", "\u{7F}", "\u{A0}"])
        func unicodePassesThrough(text: String) {
            let json = JSONValue.string(text).jsonText
            #expect(json == "\"" + text + "\"")
            #expect(Array(json.utf8) == [0x22] + Array(text.utf8) + [0x22])
        }
    }
}

extension JSONTests {
    @Suite("Numbers, booleans, null")
    struct Scalars {
        @Test(
            "integers are exact, the extremes included",
            arguments: [
                (0, "0"), (-1, "-1"), (42, "42"), (-50, "-50"), (Int.max, "9223372036854775807"),
                (Int.min, "-9223372036854775808"),
            ])
        func integers(value: Int, text: String) {
            #expect(JSONValue.int(value).jsonText == text)
        }

        @Test(
            "doubles: plain decimal, at most 6 fractional digits, trailing zeros trimmed to one",
            arguments: [
                (0.1, "0.1"), (1.0, "1.0"), (-2.5, "-2.5"), (12, "12.0"), (0, "0.0"), (0.001, "0.001"),
                (0.000001, "0.000001"),
                (0.1234567, "0.123457"), (0.30000000000000004, "0.3"), (123456.789, "123456.789"), (-0.5, "-0.5"),
                (15.25, "15.25"), (1e20, "100000000000000000000.0"), (1e-7, "0.0"), (-1e-7, "0.0"), (-0.0, "0.0"),
                (9.9999999, "10.0"), (-123.4560001, "-123.456"),
            ])
        func doubles(value: Double, text: String) {
            #expect(JSONValue.double(value).jsonText == text)
        }

        @Test("the largest double is written digit by digit, without an exponent")
        func largestDouble() {
            let text = JSONValue.double(.greatestFiniteMagnitude).jsonText
            #expect(text.hasPrefix("17976931348623157"))
            #expect(text.hasSuffix(".0"))
            #expect(text.count == 311)
            #expect(text.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") })
        }

        @Test("NaN and the infinities are null", arguments: [Double.nan, .infinity, -.infinity, .signalingNaN])
        func nonFinite(value: Double) {
            #expect(JSONValue.double(value).jsonText == "null")
            #expect(JSONValue.array([.double(value)]).jsonText == "[null]")
        }

        @Test("booleans and null")
        func booleansAndNull() {
            #expect(JSONValue.bool(true).jsonText == "true")
            #expect(JSONValue.bool(false).jsonText == "false")
            #expect(JSONValue.null.jsonText == "null")
        }
    }
}

extension JSONTests {
    @Suite("Arrays and objects")
    struct Structure {
        @Test("object fields keep the order they were written in, not sorted")
        func fieldOrder() {
            let value = JSONValue.object([("type", "device"), ("name", "xTalk-1"), ("rssi", -50), ("address", .null)])
            #expect(value.jsonText == #"{"type":"device","name":"xTalk-1","rssi":-50,"address":null}"#)
            let reversed = JSONValue.object([("z", 1), ("a", 2), ("m", 3)])
            #expect(reversed.jsonText == #"{"z":1,"a":2,"m":3}"#)
        }

        @Test("nested objects and arrays keep their order and stay compact")
        func nested() {
            let value: JSONValue = [
                "type": "frame",
                "meta": ["rssi": -71, "snr": 9.5, "channel": 3],
                "lines": ["OK", "+VER:1.2", []],
                "ok": true,
                "empty": [:],
            ]
            #expect(
                value.jsonText
                    == #"{"type":"frame","meta":{"rssi":-71,"snr":9.5,"channel":3},"#
                    + #""lines":["OK","+VER:1.2",[]],"ok":true,"empty":{}}"#
            )
        }

        @Test("keys are escaped like strings")
        func keyEscaping() {
            #expect(JSONValue.object([("a\"b\n", .int(1))]).jsonText == #"{"a\"b\n":1}"#)
        }

        @Test("empty containers")
        func empty() {
            #expect(JSONValue.array([]).jsonText == "[]")
            #expect(JSONValue.object([]).jsonText == "{}")
        }

        @Test("literals build the cases they read as")
        func literals() {
            let string: JSONValue = "a"
            let int: JSONValue = -3
            let double: JSONValue = 2.5
            let bool: JSONValue = false
            let null: JSONValue = nil
            let array: JSONValue = [1, "b"]
            let object: JSONValue = ["k": 1, "a": nil]
            #expect(string == .string("a"))
            #expect(int == .int(-3))
            #expect(double == .double(2.5))
            #expect(bool == .bool(false))
            #expect(null == .null)
            #expect(array == .array([.int(1), .string("b")]))
            #expect(object == .object([("k", .int(1)), ("a", .null)]))
        }

        @Test("equality: same case and payload; object fields in the same order")
        func equality() {
            #expect(JSONValue.object([("a", 1), ("b", [true])]) == JSONValue.object([("a", 1), ("b", [true])]))
            #expect(JSONValue.object([("a", 1), ("b", 2)]) != JSONValue.object([("b", 2), ("a", 1)]))
            #expect(JSONValue.object([("a", 1)]) != JSONValue.object([("a", 2)]))
            #expect(JSONValue.object([("a", 1)]) != JSONValue.object([("b", 1)]))
            #expect(JSONValue.object([("a", 1)]) != JSONValue.object([("a", 1), ("b", 2)]))
            #expect(JSONValue.int(1) != JSONValue.double(1))
            #expect(JSONValue.int(1) != JSONValue.bool(true))
            #expect(JSONValue.array([1, 2]) != JSONValue.array([2, 1]))
            #expect(JSONValue.string("") != JSONValue.null)
        }
    }
}

extension JSONTests {
    @Suite("Foundation reads back what we write")
    struct RoundTrip {
        static let values: [JSONValue] = [
            "plain", "quote \" backslash \\ slash /",
            "controls \u{00}\u{01}\u{08}\u{09}\u{0A}\u{0B}\u{0C}\u{0D}\u{1B}\u{1F}\u{7F}",
            "unicode é 日本 📡 👩‍👩‍👧 \u{85}\u{2028}\u{2029}", "",
            0, 1, -1, .int(.max), .int(.min),
            0.1, 1.0, -2.5, 12.0, 1e-7, 0.1234567, 1e20, 123456.789, .double(.nan), .double(.infinity),
            .double(-.infinity),
            true, false, nil,
            [], [:], [1, "two", 3.0, false, nil, [[]], ["k": "v"]],
            [
                "type": "device", "name": "xTalk \"A\"", "address": nil, "rssi": -50, "ms": 12.345678,
                "meta": ["snr": -3.25, "lines": ["OK\r\n", "+ERR:5"], "nested": ["deep": [true]]],
            ],
        ]

        @Test("every value parses back to the same value", arguments: values)
        func roundTrip(value: JSONValue) throws {
            let parsed = try parsedByFoundation(value)
            #expect(sameValue(parsed, value), "\(value.jsonText) parsed as \(parsed)")
        }

        @Test("the comparison itself notices a different value")
        func comparisonCanFail() throws {
            #expect(!sameValue(try parsedByFoundation(1), .bool(true)))
            #expect(!sameValue(try parsedByFoundation(true), .int(1)))
            #expect(!sameValue(try parsedByFoundation(0.5), .double(0.6)))
            #expect(!sameValue(try parsedByFoundation(["a": 1]), ["a": 2]))
            #expect(!sameValue(try parsedByFoundation(["a"]), ["a", "b"]))
        }
    }
}
