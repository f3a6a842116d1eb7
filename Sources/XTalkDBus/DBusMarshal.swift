import Foundation

// The D-Bus wire format (the specification, "Marshaling (Wire Format)"):
// every value aligned to its natural boundary, counted from the start of the
// message (a body starts on an 8-byte boundary, so counting from the body's
// start gives the same padding). Sans-I/O.

/// Bytes that are not a valid D-Bus message or value.
package struct DBusWireError: Error, Sendable, Hashable, CustomStringConvertible {
    package let reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { "malformed D-Bus data: \(reason)" }
}

/// Writes values in little-endian byte order.
package struct DBusEncoder {
    package private(set) var bytes: [UInt8] = []
    /// Where offset 0 of the alignment grid is, relative to `bytes[0]` (0 for a message or a body).
    private let origin: Int

    package init(origin: Int = 0) { self.origin = origin }

    package mutating func pad(to alignment: Int) {
        while (bytes.count + origin) % alignment != 0 { bytes.append(0) }
    }

    private mutating func appendInteger<T: FixedWidthInteger>(_ value: T) {
        pad(to: MemoryLayout<T>.size)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func append(_ value: DBusValue) throws(DBusWireError) {
        switch value {
        case .byte(let byte): bytes.append(byte)
        case .boolean(let flag): appendInteger(UInt32(flag ? 1 : 0))
        case .int16(let number): appendInteger(number)
        case .uint16(let number): appendInteger(number)
        case .int32(let number): appendInteger(number)
        case .uint32(let number), .unixFD(let number): appendInteger(number)
        case .int64(let number): appendInteger(number)
        case .uint64(let number): appendInteger(number)
        case .double(let number): appendInteger(number.bitPattern)
        case .string(let text), .objectPath(let text):
            let utf8 = Array(text.utf8)
            guard !utf8.contains(0) else { throw DBusWireError("a string contains a NUL byte") }
            appendInteger(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
            bytes.append(0)
        case .signature(let text):
            let utf8 = Array(text.utf8)
            guard utf8.count <= DBusSignature.maximumLength else { throw DBusWireError("a signature is too long") }
            bytes.append(UInt8(utf8.count))
            bytes.append(contentsOf: utf8)
            bytes.append(0)
        case .bytes(let data):
            appendInteger(UInt32(data.count))
            bytes.append(contentsOf: data)
        case .array(let elementSignature, let elements):
            appendInteger(UInt32(0))
            let lengthAt = bytes.count - 4
            pad(to: DBusEncoder.alignment(of: elementSignature))
            let start = bytes.count
            let code = elementSignature.utf8.first
            for element in elements {
                // The element's kind, cheaply (a full signature costs allocations per element); the
                // whole signature in debug builds.
                guard element.firstTypeCode == code else {
                    throw DBusWireError("an array of \(elementSignature) holds a \(element.signature)")
                }
                assert(
                    element.signature == elementSignature, "an array of \(elementSignature) holds \(element.signature)")
                try append(element)
            }
            let length = UInt32(bytes.count - start)
            guard length <= DBusDecoder.maximumArrayLength else { throw DBusWireError("an array is too long") }
            withUnsafeBytes(of: length.littleEndian) { raw in
                for (offset, byte) in raw.enumerated() { bytes[lengthAt + offset] = byte }
            }
        case .dictEntry(let key, let entryValue):
            pad(to: 8)
            try append(key)
            try append(entryValue)
        case .structure(let fields):
            pad(to: 8)
            for field in fields { try append(field) }
        case .variant(let inner):
            try append(.signature(inner.signature))
            try append(inner)
        }
    }

    /// The alignment of the first code of a signature.
    package static func alignment(of signature: some StringProtocol) -> Int {
        alignment(ofCode: signature.utf8.first)
    }

    /// The alignment of values whose type starts with `code`.
    package static func alignment(ofCode code: UInt8?) -> Int {
        switch code {
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "b"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "h"), UInt8(ascii: "s"),
            UInt8(ascii: "o"), UInt8(ascii: "a"):
            4
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): 8
        default: 1
        }
    }
}

/// Reads values of a known signature, in either byte order.
package struct DBusDecoder {
    /// The specification's limit on one array's length in bytes.
    package static let maximumArrayLength: UInt32 = 64 * 1_024 * 1_024
    /// The specification's limit on nesting of all containers together (variants included).
    package static let maximumDepth = 64

    private let bytes: [UInt8]
    private let littleEndian: Bool
    private let origin: Int
    package private(set) var offset: Int

    /// Reads `bytes[start...]`, where `start` lies at offset `origin` of the alignment grid.
    package init(_ bytes: [UInt8], littleEndian: Bool, start: Int = 0, origin: Int = 0) {
        self.bytes = bytes
        self.littleEndian = littleEndian
        self.offset = start
        self.origin = origin - start
    }

    package var isAtEnd: Bool { offset >= bytes.count }

    package mutating func skipPadding(to alignment: Int) throws(DBusWireError) {
        while (offset + origin) % alignment != 0 {
            guard offset < bytes.count else { throw DBusWireError("the data ends inside padding") }
            guard bytes[offset] == 0 else { throw DBusWireError("padding is not zero") }
            offset += 1
        }
    }

    private mutating func take(_ count: Int) throws(DBusWireError) -> ArraySlice<UInt8> {
        guard count >= 0, offset <= bytes.count - count else { throw DBusWireError("the data ends inside a value") }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    package mutating func readInteger<T: FixedWidthInteger>(_: T.Type) throws(DBusWireError) -> T {
        let size = MemoryLayout<T>.size
        try skipPadding(to: size)
        guard offset <= bytes.count - size else { throw DBusWireError("the data ends inside a value") }
        var value: T = 0
        if littleEndian {
            for index in stride(from: offset + size - 1, through: offset, by: -1) {
                value = value << 8 | T(bytes[index])
            }
        } else {
            for index in offset..<offset + size { value = value << 8 | T(bytes[index]) }
        }
        offset += size
        return value
    }

    /// Reads values of each complete type in `signature`, in order.
    package mutating func read(signature: String) throws(DBusWireError) -> [DBusValue] {
        // The signature as bytes, walked by index: every type below is a
        // position in it (String and Substring indexing cost more than the
        // values themselves, on BlueZ's busiest path).
        let types = Array(signature.utf8)
        guard let count = DBusSignature.completeTypeCount(types) else {
            throw DBusWireError("invalid signature \"\(signature)\"")
        }
        var values: [DBusValue] = []
        values.reserveCapacity(count)
        var index = 0
        while index < types.count {
            values.append(try read(type: types, at: index, depth: 0))
            guard let end = DBusSignature.endOfCompleteType(types, from: index) else { break }
            index = end
        }
        return values
    }

    /// The header's fields (`a(yv)`, the specification's "Header Fields"):
    /// each field's code and its variant's value, in order, read without
    /// building the array and its structures.
    package mutating func readHeaderFields(
        _ field: (UInt8, DBusValue) -> Void
    ) throws(DBusWireError) {
        let length = try readInteger(UInt32.self)
        guard length <= DBusDecoder.maximumArrayLength else { throw DBusWireError("an array is too long") }
        try skipPadding(to: 8)
        guard Int(length) <= bytes.count - offset else { throw DBusWireError("the data ends inside an array") }
        let end = offset + Int(length)
        while offset < end {
            try skipPadding(to: 8)
            guard let code = try take(1).first else { throw DBusWireError("the data ends inside a byte") }
            // Depths as in a(yv): the array 0, its structure 1, the variant 2.
            guard case .variant(let value) = try read(type: DBusDecoder.variantType, at: 0, depth: 2) else {
                throw DBusWireError("a header field is not a variant")
            }
            field(code, value)
        }
        guard offset == end else { throw DBusWireError("an array's elements overrun its length") }
    }

    private static let variantType = Array("v".utf8)

    /// The bytes of a string's content, checked: its terminating NUL, no NUL inside.
    /// Whether it is all ASCII (names, paths, signatures nearly always are).
    private mutating func readTextBytes(lengthBytes: Int) throws(DBusWireError) -> (ArraySlice<UInt8>, ascii: Bool) {
        let length = lengthBytes == 1 ? Int(try readInteger(UInt8.self)) : Int(try readInteger(UInt32.self))
        let content = try take(length)
        guard try take(1).first == 0 else { throw DBusWireError("a string lacks its terminating NUL") }
        var ascii = true
        for byte in content {
            if byte == 0 { throw DBusWireError("a string contains a NUL byte") }
            if byte >= 0x80 { ascii = false }
        }
        return (content, ascii)
    }

    private mutating func readText(lengthBytes: Int) throws(DBusWireError) -> String {
        let (content, ascii) = try readTextBytes(lengthBytes: lengthBytes)
        // All ASCII is valid UTF-8 as it stands.
        if ascii { return String(decoding: content, as: UTF8.self) }
        guard let text = String(validating: content, as: UTF8.self) else {
            throw DBusWireError("a string is not valid UTF-8")
        }
        return text
    }

    /// A path's or a signature's bytes: text like any string, checked by the caller for its syntax.
    private mutating func readNameBytes(lengthBytes: Int) throws(DBusWireError) -> ArraySlice<UInt8> {
        let (content, ascii) = try readTextBytes(lengthBytes: lengthBytes)
        guard ascii || String(validating: content, as: UTF8.self) != nil else {
            throw DBusWireError("a string is not valid UTF-8")
        }
        return content
    }

    /// One-code type signatures, so that a variant of a basic type needs no array of its own.
    private static let singleCodes: [[UInt8]] = (0..<128).map { [UInt8($0)] }

    /// Reads the value of the complete type starting at `types[start]` (a
    /// signature already checked to be valid there).
    private mutating func read(type types: [UInt8], at start: Int, depth: Int) throws(DBusWireError) -> DBusValue {
        guard depth <= DBusDecoder.maximumDepth else { throw DBusWireError("containers are nested too deeply") }
        guard start < types.count else { throw DBusWireError("empty type") }
        switch types[start] {
        case UInt8(ascii: "y"):
            guard let byte = try take(1).first else { throw DBusWireError("the data ends inside a byte") }
            return .byte(byte)
        case UInt8(ascii: "b"):
            let raw = try readInteger(UInt32.self)
            guard raw <= 1 else { throw DBusWireError("a boolean is \(raw), not 0 or 1") }
            return .boolean(raw == 1)
        case UInt8(ascii: "n"): return .int16(try readInteger(Int16.self))
        case UInt8(ascii: "q"): return .uint16(try readInteger(UInt16.self))
        case UInt8(ascii: "i"): return .int32(try readInteger(Int32.self))
        case UInt8(ascii: "u"): return .uint32(try readInteger(UInt32.self))
        case UInt8(ascii: "h"): return .unixFD(try readInteger(UInt32.self))
        case UInt8(ascii: "x"): return .int64(try readInteger(Int64.self))
        case UInt8(ascii: "t"): return .uint64(try readInteger(UInt64.self))
        case UInt8(ascii: "d"): return .double(Double(bitPattern: try readInteger(UInt64.self)))
        case UInt8(ascii: "s"): return .string(try readText(lengthBytes: 4))
        case UInt8(ascii: "o"):
            let content = try readNameBytes(lengthBytes: 4)
            let path = String(decoding: content, as: UTF8.self)
            guard DBusNames.isValidObjectPath(utf8: content) else {
                throw DBusWireError("invalid object path \"\(path)\"")
            }
            return .objectPath(path)
        case UInt8(ascii: "g"):
            let content = try readNameBytes(lengthBytes: 1)
            let text = String(decoding: content, as: UTF8.self)
            guard DBusSignature.completeTypeCount(Array(content)) != nil else {
                throw DBusWireError("invalid signature \"\(text)\"")
            }
            return .signature(text)
        case UInt8(ascii: "v"):
            let content = try readNameBytes(lengthBytes: 1)
            let inner: [UInt8]
            if content.count == 1, let code = content.first, code < 0x80 {
                inner = DBusDecoder.singleCodes[Int(code)]
            } else {
                inner = Array(content)
            }
            guard DBusSignature.completeTypeCount(inner) == 1 else {
                let text = String(decoding: content, as: UTF8.self)
                throw DBusWireError("a variant's signature \"\(text)\" is not one complete type")
            }
            return .variant(try read(type: inner, at: 0, depth: depth + 1))
        case UInt8(ascii: "a"):
            let element = start + 1
            let length = try readInteger(UInt32.self)
            guard length <= DBusDecoder.maximumArrayLength else { throw DBusWireError("an array is too long") }
            // The element's type runs to the array's end (a dict entry is no complete type alone).
            guard element < types.count, let elementEnd = DBusSignature.endOfCompleteType(types, from: start)
            else { throw DBusWireError("an array lacks its element type") }
            try skipPadding(to: DBusEncoder.alignment(ofCode: types[element]))
            guard Int(length) <= bytes.count - offset else { throw DBusWireError("the data ends inside an array") }
            let end = offset + Int(length)
            if types[element] == UInt8(ascii: "y") { return .bytes(Data(try take(Int(length)))) }
            var elements: [DBusValue] = []
            while offset < end { elements.append(try read(type: types, at: element, depth: depth + 1)) }
            guard offset == end else { throw DBusWireError("an array's elements overrun its length") }
            return .array(elementSignature: String(decoding: types[element..<elementEnd], as: UTF8.self), elements)
        case UInt8(ascii: "{"):
            try skipPadding(to: 8)
            let key = try read(type: types, at: start + 1, depth: depth + 1)
            let value = try read(type: types, at: start + 2, depth: depth + 1)
            return .dictEntry(key, value)
        case UInt8(ascii: "("):
            try skipPadding(to: 8)
            var values: [DBusValue] = []
            var index = start + 1
            while index < types.count, types[index] != UInt8(ascii: ")") {
                values.append(try read(type: types, at: index, depth: depth + 1))
                guard let end = DBusSignature.endOfCompleteType(types, from: index) else {
                    throw DBusWireError("invalid struct signature")
                }
                index = end
            }
            return .structure(values)
        default:
            throw DBusWireError("unknown type code \(String(decoding: types[start...start], as: UTF8.self))")
        }
    }
}

/// Name syntax (the specification, "Valid Names").
package enum DBusNames {
    /// "/", or "/" followed by elements of [A-Za-z0-9_], each non-empty,
    /// separated by single "/", with no "/" at the end.
    package static func isValidObjectPath(_ path: String) -> Bool {
        isValidObjectPath(utf8: path.utf8)
    }

    /// The same, on the path's UTF-8 bytes.
    package static func isValidObjectPath(utf8: some Sequence<UInt8>) -> Bool {
        var bytes = utf8.makeIterator()
        guard bytes.next() == UInt8(ascii: "/") else { return false }
        guard var byte = bytes.next() else { return true }  // "/"
        var afterSlash = true
        while true {
            switch byte {
            case UInt8(ascii: "/"):
                guard !afterSlash else { return false }  // an empty element
                afterSlash = true
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "_"):
                afterSlash = false
            default:
                return false
            }
            guard let next = bytes.next() else { return !afterSlash }  // no "/" at the end
            byte = next
        }
    }
}
