// The tool's `--json` output: one compact JSON object per line, with stable
// field names in a stable order, so scripts and tests can compare lines as
// text. Foundation's JSONSerialization reorders keys, so this tiny encoder
// keeps object fields in the order they are written.

import Foundation

/// A JSON value whose object fields keep their order.
enum JSONValue: Equatable, Sendable {
    /// A string; written with RFC 8259 escapes.
    case string(String)
    /// An integer; written exactly, `Int.min` and `Int.max` included.
    case int(Int)
    /// A number; written in plain decimal rounded to 6 fractional digits, or `null` if not finite.
    case double(Double)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null
    /// An array, in order.
    case array([JSONValue])
    /// An object whose fields are written in this order; keys should be unique (not checked).
    case object([(String, JSONValue)])

    /// Structural equality; object fields must match in order, because the order is part of the output.
    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        case (.bool(let a), .bool(let b)): a == b
        case (.null, .null): true
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.elementsEqual(b) { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    /// Compact JSON text: no spaces and no newline, so one value is exactly one line of output.
    ///
    /// Strings escape `"`, `\` and control characters (`\b \f \n \r \t`, otherwise `\u00xx`), and also
    /// U+0085, U+2028 and U+2029, which some line readers treat as line breaks; other text passes through as UTF-8.
    /// Doubles are rounded to 6 fractional digits (microseconds of a second) and written without exponent, trailing
    /// zeros trimmed but keeping one (`12.0`, `0.5`; `1e-7` is `0.0`); NaN and infinities are `null`.
    var jsonText: String {
        var text = ""
        write(to: &text)
        return text
    }

    /// Appends the compact text, so nested values share one buffer.
    private func write(to text: inout String) {
        switch self {
        case .string(let value):
            Self.writeString(value, to: &text)
        case .int(let value):
            text += String(value)
        case .double(let value):
            text += Self.decimal(value)
        case .bool(let value):
            text += value ? "true" : "false"
        case .null:
            text += "null"
        case .array(let elements):
            text += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { text += "," }
                element.write(to: &text)
            }
            text += "]"
        case .object(let fields):
            text += "{"
            for (index, (key, value)) in fields.enumerated() {
                if index > 0 { text += "," }
                Self.writeString(key, to: &text)
                text += ":"
                value.write(to: &text)
            }
            text += "}"
        }
    }

    /// A quoted string with the escapes `jsonText` documents.
    private static func writeString(_ value: String, to text: inout String) {
        text += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\u{08}": text += "\\b"
            case "\u{0C}": text += "\\f"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case "\u{00}"..."\u{1F}", "\u{85}", "\u{2028}", "\u{2029}":
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }

    /// A finite double as plain decimal with at most 6 fractional digits; `null` otherwise.
    private static func decimal(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        // printf's %f rounds correctly and never uses an exponent; the POSIX locale keeps "." as the separator.
        var digits = String(format: "%.6f", value)
        while digits.hasSuffix("0") { digits.removeLast() }
        if digits.hasSuffix(".") { digits += "0" }
        // A value that rounds to zero prints as 0.0, not -0.0: the sign of a vanished value is noise.
        if digits == "-0.0" { return "0.0" }
        return digits
    }
}

/// `"scan"` is `.string("scan")`.
extension JSONValue: ExpressibleByStringLiteral {
    /// Makes a `.string`.
    init(stringLiteral value: String) {
        self = .string(value)
    }
}

/// `-50` is `.int(-50)`.
extension JSONValue: ExpressibleByIntegerLiteral {
    /// Makes an `.int`.
    init(integerLiteral value: Int) {
        self = .int(value)
    }
}

/// `0.25` is `.double(0.25)`.
extension JSONValue: ExpressibleByFloatLiteral {
    /// Makes a `.double`.
    init(floatLiteral value: Double) {
        self = .double(value)
    }
}

/// `true` is `.bool(true)`.
extension JSONValue: ExpressibleByBooleanLiteral {
    /// Makes a `.bool`.
    init(booleanLiteral value: Bool) {
        self = .bool(value)
    }
}

/// `nil` is `.null`.
extension JSONValue: ExpressibleByNilLiteral {
    /// Makes `.null`.
    init(nilLiteral: ()) {
        self = .null
    }
}

/// `[1, "a"]` is an `.array`.
extension JSONValue: ExpressibleByArrayLiteral {
    /// Makes an `.array` in the written order.
    init(arrayLiteral elements: JSONValue...) {
        self = .array(elements)
    }
}

/// `["type": "device", "rssi": -50]` is an `.object` with the fields in the written order.
extension JSONValue: ExpressibleByDictionaryLiteral {
    /// Makes an `.object`; unlike a Swift dictionary, the literal's order is kept.
    init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(elements)
    }
}
