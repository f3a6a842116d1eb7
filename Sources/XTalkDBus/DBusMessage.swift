import Foundation

// Messages (the specification, "Message Format"), their encoding, and a framer
// that cuts a byte stream into messages however the bytes arrive. Sans-I/O.

package struct DBusMessage: Sendable, Hashable {
    package enum Kind: UInt8, Sendable, Hashable {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    package var kind: Kind
    /// NO_REPLY_EXPECTED (0x1).
    package var noReplyExpected = false
    package var serial: UInt32 = 0
    package var path: String?
    package var interface: String?
    package var member: String?
    package var errorName: String?
    package var replySerial: UInt32?
    package var destination: String?
    package var sender: String?
    package var body: [DBusValue] = []
    /// The file descriptors the message carries (`UNIX_FD` values in the body
    /// are indices into this list). They travel beside the bytes (SCM_RIGHTS),
    /// so only the socket driver fills them in on receipt.
    package var fileDescriptors: [DBusFileDescriptor] = []
    /// How many descriptors the header says came with the message (UNIX_FDS).
    package private(set) var declaredFileDescriptorCount = 0

    package init(kind: Kind) { self.kind = kind }

    package static func methodCall(
        destination: String?, path: String, interface: String?, member: String, body: [DBusValue] = []
    ) -> DBusMessage {
        var message = DBusMessage(kind: .methodCall)
        message.destination = destination
        message.path = path
        message.interface = interface
        message.member = member
        message.body = body
        return message
    }

    package static func signal(path: String, interface: String, member: String, body: [DBusValue] = []) -> DBusMessage {
        var message = DBusMessage(kind: .signal)
        message.path = path
        message.interface = interface
        message.member = member
        message.body = body
        return message
    }

    /// A reply to `call` (set `body` for its values).
    package static func methodReturn(to call: DBusMessage, body: [DBusValue] = []) -> DBusMessage {
        var message = DBusMessage(kind: .methodReturn)
        message.replySerial = call.serial
        message.destination = call.sender
        message.body = body
        return message
    }

    package static func error(to call: DBusMessage, name: String, text: String) -> DBusMessage {
        var message = DBusMessage(kind: .error)
        message.replySerial = call.serial
        message.destination = call.sender
        message.errorName = name
        message.body = [.string(text)]
        return message
    }

    /// The body's signature.
    package var signature: String { body.map(\.signature).joined() }

    /// An error's text (its first string argument), when it has one.
    package var errorText: String? {
        if case .string(let text)? = body.first { return text }
        return nil
    }

    /// The wire bytes, little-endian.
    package func encoded() throws(DBusWireError) -> [UInt8] {
        var bodyEncoder = DBusEncoder()
        for value in body { try bodyEncoder.append(value) }
        var fields: [DBusValue] = []
        func field(_ code: UInt8, _ value: DBusValue?) {
            if let value { fields.append(.structure([.byte(code), .variant(value)])) }
        }
        field(1, path.map { .objectPath($0) })
        field(2, interface.map { .string($0) })
        field(3, member.map { .string($0) })
        field(4, errorName.map { .string($0) })
        field(5, replySerial.map { .uint32($0) })
        field(6, destination.map { .string($0) })
        field(7, sender.map { .string($0) })
        if !body.isEmpty { field(8, .signature(signature)) }
        if !fileDescriptors.isEmpty { field(9, .uint32(UInt32(fileDescriptors.count))) }
        var encoder = DBusEncoder()
        try encoder.append(.byte(UInt8(ascii: "l")))
        try encoder.append(.byte(kind.rawValue))
        try encoder.append(.byte(noReplyExpected ? 1 : 0))
        try encoder.append(.byte(1))
        try encoder.append(.uint32(UInt32(bodyEncoder.bytes.count)))
        try encoder.append(.uint32(serial))
        try encoder.append(.array(elementSignature: "(yv)", fields))
        encoder.pad(to: 8)
        let message = encoder.bytes + bodyEncoder.bytes
        guard message.count <= DBusMessageFramer.maximumMessageLength else {
            throw DBusWireError("the message is longer than D-Bus allows")
        }
        return message
    }

    /// Decodes one complete message (exactly `bytes`).
    package static func decode(_ bytes: [UInt8]) throws(DBusWireError) -> DBusMessage {
        guard bytes.count >= 16 else { throw DBusWireError("a message is shorter than its fixed header") }
        let littleEndian: Bool
        switch bytes[0] {
        case UInt8(ascii: "l"): littleEndian = true
        case UInt8(ascii: "B"): littleEndian = false
        default: throw DBusWireError("unknown byte order \(bytes[0])")
        }
        guard let kind = Kind(rawValue: bytes[1]) else { throw DBusWireError("unknown message type \(bytes[1])") }
        guard bytes[3] == 1 else { throw DBusWireError("unknown protocol version \(bytes[3])") }
        var decoder = DBusDecoder(bytes, littleEndian: littleEndian, start: 4, origin: 4)
        let bodyLength = Int(try decoder.readInteger(UInt32.self))
        var message = DBusMessage(kind: kind)
        message.noReplyExpected = bytes[2] & 0x1 != 0
        message.serial = try decoder.readInteger(UInt32.self)
        guard message.serial != 0 else { throw DBusWireError("a message has serial 0") }
        var bodySignature = ""
        // A field of the wrong type is reported once every field has decoded
        // (a damaged value anywhere comes first, as it would in a full read).
        var wrongType: DBusWireError?
        try decoder.readHeaderFields { code, value in
            switch (code, value) {
            case (1, .objectPath(let text)): message.path = text
            case (2, .string(let text)): message.interface = text
            case (3, .string(let text)): message.member = text
            case (4, .string(let text)): message.errorName = text
            case (5, .uint32(let number)): message.replySerial = number
            case (6, .string(let text)): message.destination = text
            case (7, .string(let text)): message.sender = text
            case (8, .signature(let text)): bodySignature = text
            case (9, .uint32(let count)):
                // A sender may pass at most 253 descriptors at once (SCM_MAX_FD).
                if count > 253, wrongType == nil {
                    wrongType = DBusWireError("a message declares \(count) file descriptors")
                }
                message.declaredFileDescriptorCount = Int(count)
            case (1...9, _):
                if wrongType == nil { wrongType = DBusWireError("header field \(code) has the wrong type") }
            default: break  // unknown fields are ignored, as the specification says
            }
        }
        if let wrongType { throw wrongType }
        switch kind {
        case .methodCall where message.path == nil || message.member == nil:
            throw DBusWireError("a method call lacks its path or member")
        case .signal where message.path == nil || message.member == nil || message.interface == nil:
            throw DBusWireError("a signal lacks its path, interface or member")
        case .methodReturn where message.replySerial == nil, .error where message.replySerial == nil:
            throw DBusWireError("a reply lacks its reply serial")
        case .error where message.errorName == nil:
            throw DBusWireError("an error lacks its name")
        default: break
        }
        try decoder.skipPadding(to: 8)
        let bodyStart = decoder.offset
        guard bytes.count - bodyStart == bodyLength else { throw DBusWireError("the body length does not match") }
        var bodyDecoder = DBusDecoder(bytes, littleEndian: littleEndian, start: bodyStart, origin: 0)
        message.body = try bodyDecoder.read(signature: bodySignature)
        guard bodyDecoder.isAtEnd else { throw DBusWireError("the body is longer than its signature") }
        return message
    }
}

/// Cuts a byte stream into messages. Feed it bytes as they arrive (one at a
/// time or many messages at once); it returns every complete message.
package struct DBusMessageFramer {
    /// The specification's limit on one message.
    package static let maximumMessageLength = 128 * 1_024 * 1_024

    private var buffer: [UInt8] = []
    private var consumed = 0

    package init() {}

    /// Bytes received and not yet part of a complete message.
    package var pendingByteCount: Int { buffer.count - consumed }

    /// Appends `bytes` and returns the messages now complete. A malformed
    /// message is an error: the stream cannot be resynchronised, so the
    /// connection must be closed.
    package mutating func append(_ bytes: some Collection<UInt8>) throws(DBusWireError) -> [DBusMessage] {
        buffer.append(contentsOf: bytes)
        var messages: [DBusMessage] = []
        while let length = try nextMessageLength() {
            guard buffer.count - consumed >= length else { break }
            messages.append(try DBusMessage.decode(Array(buffer[consumed..<consumed + length])))
            consumed += length
        }
        if consumed == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            consumed = 0
        } else if consumed > 4_096 {
            buffer.removeFirst(consumed)
            consumed = 0
        }
        return messages
    }

    /// The length of the message at the front, once its fixed header is here.
    private func nextMessageLength() throws(DBusWireError) -> Int? {
        guard buffer.count - consumed >= 16 else { return nil }
        let start = consumed
        let littleEndian: Bool
        switch buffer[start] {
        case UInt8(ascii: "l"): littleEndian = true
        case UInt8(ascii: "B"): littleEndian = false
        default: throw DBusWireError("unknown byte order \(buffer[start])")
        }
        func uint32(at offset: Int) -> Int {
            let raw = buffer[start + offset..<start + offset + 4]
            var value = 0
            for byte in littleEndian ? raw.reversed() : Array(raw) { value = value << 8 | Int(byte) }
            return value
        }
        let bodyLength = uint32(at: 4)
        let fieldsLength = uint32(at: 12)
        guard bodyLength <= DBusMessageFramer.maximumMessageLength, fieldsLength <= Int(DBusDecoder.maximumArrayLength)
        else {
            throw DBusWireError("a message is longer than D-Bus allows")
        }
        let headerLength = (16 + fieldsLength + 7) / 8 * 8
        let total = headerLength + bodyLength
        guard total <= DBusMessageFramer.maximumMessageLength else {
            throw DBusWireError("a message is longer than D-Bus allows")
        }
        return total
    }
}
