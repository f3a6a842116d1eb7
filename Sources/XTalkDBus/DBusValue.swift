import Foundation

// The D-Bus type system (the D-Bus specification, "Type System"): values as a
// Sendable enum, and signatures. Sans-I/O: nothing here reads or writes.

/// One D-Bus value. Containers carry what their signature needs to be
/// written back unchanged: an array its element signature, a variant its
/// content (whose signature is computed).
package indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// An index into the message's file descriptors (`h`).
    case unixFD(UInt32)
    /// `ay`: kept as bytes (the GATT values), never as an array of `.byte`.
    case bytes(Data)
    /// An array whose elements all have `elementSignature` (not `y`: see `.bytes`).
    case array(elementSignature: String, [DBusValue])
    /// A dictionary entry (only as an array element: `a{..}`).
    case dictEntry(DBusValue, DBusValue)
    case structure([DBusValue])
    case variant(DBusValue)

    /// The first code of the value's signature.
    package var firstTypeCode: UInt8? {
        switch self {
        case .byte: UInt8(ascii: "y")
        case .boolean: UInt8(ascii: "b")
        case .int16: UInt8(ascii: "n")
        case .uint16: UInt8(ascii: "q")
        case .int32: UInt8(ascii: "i")
        case .uint32: UInt8(ascii: "u")
        case .int64: UInt8(ascii: "x")
        case .uint64: UInt8(ascii: "t")
        case .double: UInt8(ascii: "d")
        case .string: UInt8(ascii: "s")
        case .objectPath: UInt8(ascii: "o")
        case .signature: UInt8(ascii: "g")
        case .unixFD: UInt8(ascii: "h")
        case .bytes, .array: UInt8(ascii: "a")
        case .dictEntry: UInt8(ascii: "{")
        case .structure: UInt8(ascii: "(")
        case .variant: UInt8(ascii: "v")
        }
    }

    /// The value's complete signature.
    package var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }
}

// Convenience constructors and accessors, for the BlueZ shapes (a{sv}, a{oa{sa{sv}}}, as).
extension DBusValue {
    /// `a{sv}` from a Swift dictionary (keys sorted, so messages are reproducible).
    package static func propertyMap(_ properties: [String: DBusValue]) -> DBusValue {
        .array(
            elementSignature: "{sv}",
            properties.sorted { $0.key < $1.key }.map { .dictEntry(.string($0.key), .variant($0.value)) })
    }

    package static func stringArray(_ strings: [String]) -> DBusValue {
        .array(elementSignature: "s", strings.map { .string($0) })
    }

    package var stringValue: String? {
        switch self {
        case .string(let text), .objectPath(let text), .signature(let text): text
        case .variant(let inner): inner.stringValue
        default: nil
        }
    }

    package var boolValue: Bool? {
        switch self {
        case .boolean(let flag): flag
        case .variant(let inner): inner.boolValue
        default: nil
        }
    }

    /// Any integer type, widened.
    package var integerValue: Int64? {
        switch self {
        case .byte(let value): Int64(value)
        case .int16(let value): Int64(value)
        case .uint16(let value): Int64(value)
        case .int32(let value): Int64(value)
        case .uint32(let value): Int64(value)
        case .int64(let value): value
        case .uint64(let value): Int64(exactly: value)
        case .variant(let inner): inner.integerValue
        default: nil
        }
    }

    package var bytesValue: Data? {
        switch self {
        case .bytes(let data): data
        case .variant(let inner): inner.bytesValue
        default: nil
        }
    }

    package var arrayValue: [DBusValue]? {
        switch self {
        case .array(_, let elements): elements
        case .variant(let inner): inner.arrayValue
        default: nil
        }
    }

    package var stringArrayValue: [String]? { arrayValue?.compactMap(\.stringValue) }

    /// A dictionary (`a{..}`) as pairs, in wire order.
    package var dictionaryEntries: [(key: DBusValue, value: DBusValue)]? {
        guard let elements = arrayValue else { return nil }
        var entries: [(key: DBusValue, value: DBusValue)] = []
        entries.reserveCapacity(elements.count)
        for element in elements {
            guard case .dictEntry(let key, let value) = element else { return nil }
            entries.append((key, value))
        }
        return entries
    }

    /// One property of an `a{sv}` (its variant's value), found without
    /// building the map: nil when absent or when this is no property map. A
    /// name given twice gives its last entry, as in `propertyMapValue`.
    package func property(_ name: String) -> DBusValue? {
        guard let elements = arrayValue else { return nil }
        for case .dictEntry(.string(let key), let value) in elements.reversed() where key == name {
            if case .variant(let inner) = value { return inner }
            return value
        }
        return nil
    }

    /// An `a{sv}` as a Swift dictionary of the variants' contents.
    package var propertyMapValue: [String: DBusValue]? {
        guard let entries = dictionaryEntries else { return nil }
        var map: [String: DBusValue] = [:]
        for (key, value) in entries {
            guard let name = key.stringValue else { return nil }
            if case .variant(let inner) = value { map[name] = inner } else { map[name] = value }
        }
        return map
    }
}

/// Signatures: validation and splitting into single complete types.
package enum DBusSignature {
    /// The specification's limit on a signature's length.
    package static let maximumLength = 255
    /// The specification's limit on array and struct nesting, each.
    package static let maximumNesting = 32

    /// How many complete types `signature` (its bytes) holds, or nil when it is not valid.
    package static func completeTypeCount(_ signature: [UInt8]) -> Int? {
        guard signature.count <= maximumLength else { return nil }
        var count = 0
        var index = 0
        while index < signature.count {
            guard let end = endOfCompleteType(signature, from: index, arrays: 0, structs: 0) else { return nil }
            count += 1
            index = end
        }
        return count
    }

    /// The index just past the complete type that starts at `start` in a
    /// signature checked by `completeTypeCount` (nil where it is not valid).
    static func endOfCompleteType(_ signature: [UInt8], from start: Int) -> Int? {
        if start < signature.count, isOneCharacterType(signature[start]) { return start + 1 }
        return endOfCompleteType(signature, from: start, arrays: 0, structs: 0)
    }

    /// A complete type of one character: a basic type or a variant.
    private static func isOneCharacterType(_ code: UInt8) -> Bool {
        isBasic(code) || code == UInt8(ascii: "v")
    }

    /// The basic type codes: "ybnqiuxtdsogh".
    private static func isBasic(_ code: UInt8) -> Bool {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"), UInt8(ascii: "i"),
            UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "s"),
            UInt8(ascii: "o"), UInt8(ascii: "g"), UInt8(ascii: "h"):
            true
        default: false
        }
    }

    /// The index just past the complete type that starts at `start`.
    private static func endOfCompleteType(_ bytes: [UInt8], from start: Int, arrays: Int, structs: Int) -> Int? {
        guard start < bytes.count else { return nil }
        let code = bytes[start]
        if isOneCharacterType(code) { return start + 1 }
        switch code {
        case UInt8(ascii: "a"):
            guard arrays < maximumNesting else { return nil }
            if start + 1 < bytes.count, bytes[start + 1] == UInt8(ascii: "{") {
                // A dict entry: a basic key, one complete value, then "}".
                guard start + 2 < bytes.count, isBasic(bytes[start + 2]) else { return nil }
                guard
                    let valueEnd = endOfCompleteType(bytes, from: start + 3, arrays: arrays + 1, structs: structs + 1),
                    valueEnd < bytes.count, bytes[valueEnd] == UInt8(ascii: "}")
                else { return nil }
                return valueEnd + 1
            }
            return endOfCompleteType(bytes, from: start + 1, arrays: arrays + 1, structs: structs)
        case UInt8(ascii: "("):
            guard structs < maximumNesting else { return nil }
            var index = start + 1
            var fields = 0
            while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                guard let end = endOfCompleteType(bytes, from: index, arrays: arrays, structs: structs + 1) else {
                    return nil
                }
                index = end
                fields += 1
            }
            guard index < bytes.count, fields > 0 else { return nil }
            return index + 1
        default:
            return nil
        }
    }
}
