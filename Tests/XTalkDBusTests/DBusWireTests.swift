import Foundation
import Testing

@testable import XTalkDBus

@Suite("D-Bus wire format")
struct DBusWireTests {
    /// One value of every type, nested the way BlueZ nests them.
    /// (Made afresh each time: a static let of indirect enum values keeps its
    /// boxes behind pointers whose spare bits carry the case, which
    /// LeakSanitizer reports as leaked.)
    static var everyType: [DBusValue] {
        [
            .byte(0xFE), .boolean(true), .int16(-2), .uint16(0xBEEF), .int32(-70_000), .uint32(0xDEAD_BEEF),
            .int64(-1 << 40), .uint64(1 << 63), .double(-0.5), .string("héllo"), .objectPath("/org/bluez/hci0"),
            .signature("a{sv}"), .unixFD(3), .bytes(Data([0x41, 0x54, 0x0D, 0x0A])),
            .array(elementSignature: "s", []),
            .propertyMap(["Name": .string("xTalk"), "RSSI": .int16(-60), "Connected": .boolean(false)]),
            .array(
                elementSignature: "{qv}",
                [.dictEntry(.uint16(0x0A0B), .variant(.bytes(Data([1, 2, 3]))))]),
            .structure([.byte(1), .variant(.array(elementSignature: "x", [.int64(5)]))]),
            .variant(.variant(.string("nested"))),
        ]
    }

    static func signal(_ index: Int) -> DBusMessage {
        var message = DBusMessage.signal(
            path: "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000c/char000d",
            interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            body: [
                .string("org.bluez.GattCharacteristic1"),
                .propertyMap(["Value": .bytes(Data("+DI:\(index)\r\n".utf8))]), .stringArray([]),
            ])
        message.serial = UInt32(index + 1)
        message.sender = ":1.7"
        return message
    }

    @Test func everyTypeRoundTrips() throws {
        var message = DBusMessage.methodCall(
            destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
            member: "GetManagedObjects", body: Self.everyType)
        message.serial = 9
        let bytes = try message.encoded()
        #expect(bytes.count % 8 == Self.bodyLength(bytes) % 8)
        let decoded = try DBusMessage.decode(bytes)
        #expect(decoded == message)
        #expect(decoded.signature == "ybnqiuxtdsoghayasa{sv}a{qv}(yv)v")
    }

    static func bodyLength(_ bytes: [UInt8]) -> Int {
        Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
    }

    /// The specification's own layout, checked byte by byte: a call with one
    /// string, from the fixed header to the body.
    @Test func encodesTheSpecificationsLayout() throws {
        var message = DBusMessage.methodCall(
            destination: nil, path: "/a", interface: nil, member: "M", body: [.string("x")])
        message.serial = 1
        let bytes = try message.encoded()
        let expected: [UInt8] =
            [0x6C, 1, 0, 1, 6, 0, 0, 0, 1, 0, 0, 0, 0x27, 0, 0, 0]  // l, call, flags, v1, body 6, serial 1, fields 39
            + [1, 1, 0x6F, 0, 2, 0, 0, 0, 0x2F, 0x61, 0, 0, 0, 0, 0, 0]  // (PATH, o "/a") + pad
            + [3, 1, 0x73, 0, 1, 0, 0, 0, 0x4D, 0, 0, 0, 0, 0, 0, 0]  // (MEMBER, s "M") + pad
            + [8, 1, 0x67, 0, 1, 0x73, 0, 0]  // (SIGNATURE, g "s") + pad to 8
            + [1, 0, 0, 0, 0x78, 0]  // body: s "x"
        #expect(bytes == expected)
    }

    /// UNIX_FDS (header field 9) says how many descriptors travel beside the
    /// bytes; the decoder reports the count (the socket driver attaches them).
    @Test func declaresItsFileDescriptors() throws {
        var message = DBusMessage.methodCall(
            destination: nil, path: "/a", interface: nil, member: "M", body: [.unixFD(0), .uint16(247)])
        message.serial = 7
        message.fileDescriptors = [DBusFileDescriptor(adopting: -1)]
        let decoded = try DBusMessage.decode(try message.encoded())
        #expect(decoded.declaredFileDescriptorCount == 1)
        #expect(decoded.fileDescriptors.isEmpty)
        #expect(decoded.body == [.unixFD(0), .uint16(247)])
        message.fileDescriptors = []
        #expect(try DBusMessage.decode(try message.encoded()).declaredFileDescriptorCount == 0)
    }

    @Test func decodesBigEndianMessages() throws {
        // A signal as a big-endian peer writes it: "B", a uint32 argument 0x01020304.
        let bytes: [UInt8] =
            [0x42, 4, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7, 0, 0, 0, 0x37]
            + [1, 1, 0x6F, 0, 0, 0, 0, 2, 0x2F, 0x61, 0, 0, 0, 0, 0, 0]
            + [2, 1, 0x73, 0, 0, 0, 0, 3, 0x61, 0x2E, 0x62, 0, 0, 0, 0, 0]
            + [3, 1, 0x73, 0, 0, 0, 0, 1, 0x53, 0, 0, 0, 0, 0, 0, 0]
            + [8, 1, 0x67, 0, 1, 0x75, 0, 0]
            + [1, 2, 3, 4]
        let message = try DBusMessage.decode(bytes)
        #expect(message.kind == .signal)
        #expect(message.serial == 7)
        #expect(message.path == "/a")
        #expect(message.interface == "a.b")
        #expect(message.member == "S")
        #expect(message.body == [.uint32(0x0102_0304)])
    }

    /// The framer finds the same messages however the stream is cut: a byte
    /// at a time, in BLE-MTU-sized pieces (20 and 244 bytes), all at once.
    @Test(arguments: [1, 20, 244, Int.max])
    func framerCutsAnyChunking(chunk: Int) throws {
        let messages = (0..<40).map(Self.signal)
        let stream = try messages.flatMap { try $0.encoded() }
        var framer = DBusMessageFramer()
        var received: [DBusMessage] = []
        var offset = 0
        while offset < stream.count {
            let end = chunk == Int.max ? stream.count : min(stream.count, offset + chunk)
            received += try framer.append(stream[offset..<end])
            offset = end
        }
        #expect(received == messages)
        #expect(framer.pendingByteCount == 0)
    }

    @Test func framerKeepsAPartialMessage() throws {
        let bytes = try Self.signal(0).encoded()
        var framer = DBusMessageFramer()
        #expect(try framer.append(bytes.dropLast()).isEmpty)
        #expect(framer.pendingByteCount == bytes.count - 1)
        #expect(try framer.append(bytes.suffix(1)) == [Self.signal(0)])
    }

    /// Corrupt input is a typed error, never a crash.
    @Test(arguments: [
        ("a boolean of 2", "b", [2, 0, 0, 0] as [UInt8]),
        ("a string without its NUL", "s", [1, 0, 0, 0, 0x41, 0x41]),
        ("a string with a NUL inside", "s", [2, 0, 0, 0, 0x41, 0, 0]),
        ("a string that is not UTF-8", "s", [1, 0, 0, 0, 0xFF, 0]),
        ("a truncated integer", "u", [1, 2]),
        ("an array longer than the data", "ay", [9, 0, 0, 0, 1]),
        ("an array longer than D-Bus allows", "ay", [0, 0, 0, 0x10]),
        ("a variant of two types", "v", [2, 0x79, 0x79, 0, 1, 1]),
        ("an invalid object path", "o", [2, 0, 0, 0, 0x2F, 0x2F, 0]),
        ("non-zero padding", "(yu)", [1, 9, 0, 0, 1, 0, 0, 0]),
    ])
    func rejectsMalformedValues(label: String, signature: String, bytes: [UInt8]) {
        var decoder = DBusDecoder(bytes, littleEndian: true)
        #expect(throws: DBusWireError.self, "\(label)") { try decoder.read(signature: signature) }
    }

    @Test(arguments: [
        ("/", true), ("/a", true), ("/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service0010/char0012", true),
        ("/_9/Z", true), ("", false), ("a", false), ("a/b", false), ("/a/", false), ("//", false),
        ("/a//b", false), ("/a-b", false), ("/a.b", false), ("/\u{E4}", false),
    ])
    func objectPathSyntax(path: String, valid: Bool) {
        #expect(DBusNames.isValidObjectPath(path) == valid, "\(path)")
    }

    @Test(arguments: [
        ("y", true), ("v", true), ("o", true), ("ay", true), ("a{sv}", true), ("(yv)", true), ("", false),
        ("a", false), ("z", false), ("{", false), ("yy", false), ("sa{sv}as", false),
    ])
    func singleCompleteTypes(signature: String, single: Bool) {
        #expect((DBusSignature.completeTypeCount(Array(signature.utf8)) == 1) == single, "\(signature)")
    }

    /// Strings that are not ASCII take the validating path; ASCII ones a faster one. Both decode exactly.
    @Test(arguments: ["org.bluez.GattCharacteristic1", "", "Gerät ✓ 🛰"])
    func stringsDecodeExactly(text: String) throws {
        var encoder = DBusEncoder()
        try encoder.append(.string(text))
        var decoder = DBusDecoder(encoder.bytes, littleEndian: true)
        #expect(try decoder.read(signature: "s") == [.string(text)])
    }

    /// BlueZ's notification path looks a property up in place, as the map would give it.
    @Test func propertyLookupMatchesTheMap() {
        let map = DBusValue.propertyMap([
            "Value": .bytes(Data([1, 2])), "MTU": .uint16(247), "Notifying": .boolean(true),
        ])
        for name in ["Value", "MTU", "Notifying", "Absent"] {
            #expect(map.property(name) == map.propertyMapValue?[name], "\(name)")
        }
        #expect(map.property("MTU") == .uint16(247))
        #expect(map.property("Absent") == nil)
        #expect(DBusValue.string("Value").property("Value") == nil, "not a property map")
        // A key twice (valid on the wire; bluetoothd never sends it): the last one, as in the map.
        let twice = DBusValue.array(
            elementSignature: "{sv}",
            [
                .dictEntry(.string("Value"), .variant(.bytes(Data([1])))),
                .dictEntry(.string("MTU"), .variant(.uint16(23))),
                .dictEntry(.string("Value"), .variant(.bytes(Data([2])))),
            ])
        #expect(twice.property("Value") == .bytes(Data([2])))
        #expect(twice.property("Value") == twice.propertyMapValue?["Value"])
    }

    @Test func rejectsVariantsNestedTooDeeply() throws {
        var value = DBusValue.byte(1)
        for _ in 0..<(DBusDecoder.maximumDepth + 2) { value = .variant(value) }
        var encoder = DBusEncoder()
        try encoder.append(value)
        var decoder = DBusDecoder(encoder.bytes, littleEndian: true)
        #expect(throws: DBusWireError.self) { try decoder.read(signature: "v") }
    }

    @Test(arguments: ["a", "(", "()", "a{vs}", "{sv}", "a{s}", "z", String(repeating: "a", count: 40) + "y"])
    func rejectsInvalidSignatures(signature: String) {
        #expect(DBusSignature.completeTypeCount(Array(signature.utf8)) == nil)
    }

    @Test func framerRejectsGarbage() {
        var framer = DBusMessageFramer()
        #expect(throws: DBusWireError.self) { try framer.append(Array("HTTP/1.1 200 OK\r\n".utf8)) }
    }

    /// Random damage to valid messages never crashes the decoder: it either
    /// decodes or throws. Counts both, so a decoder that rejects everything
    /// (or accepts everything) shows.
    @Test func randomDamageIsAlwaysATypedOutcome() throws {
        let original = try DBusMessage.methodCall(
            destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Adapter1",
            member: "SetDiscoveryFilter",
            body: [
                .propertyMap(["UUIDs": .stringArray(["0000fff0-0000-1000-8000-00805f9b34fb"]), "RSSI": .int16(-90)])
            ]
        ).withSerial(3).encoded()
        var generator = SplitMix(seed: 0xDB05)
        var decoded = 0
        var rejected = 0
        for _ in 0..<5_000 {
            var bytes = original
            for _ in 0..<(1 + Int(generator.next() % 4)) {
                bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
            }
            do {
                _ = try DBusMessage.decode(bytes)
                decoded += 1
            } catch {
                rejected += 1
            }
        }
        #expect(decoded + rejected == 5_000)
        #expect(decoded > 0)
        #expect(rejected > 2_500)
    }
}

extension DBusMessage {
    func withSerial(_ serial: UInt32) -> DBusMessage {
        var copy = self
        copy.serial = serial
        return copy
    }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("D-Bus authentication and addresses")
struct DBusAuthTests {
    @Test func greetingNamesTheUIDInHex() {
        #expect(DBusAuthClient.greeting(uid: 1000) == [0] + Array("AUTH EXTERNAL 31303030\r\n".utf8))
    }

    /// Feeds `reply` in pieces of `chunk` bytes; returns the outcome and everything the client sent.
    private func run(_ auth: inout DBusAuthClient, _ reply: [UInt8], chunk: Int) -> (DBusAuthClient.Outcome, String) {
        var sent = auth.takeOutput()
        var outcome = DBusAuthClient.Outcome.waiting
        var offset = 0
        while offset < reply.count, outcome == .waiting {
            outcome = auth.receive(reply[offset..<min(reply.count, offset + chunk)])
            sent += auth.takeOutput()
            offset += chunk
        }
        return (outcome, String(decoding: sent, as: UTF8.self))
    }

    @Test(arguments: [1, 3, 100])
    func acceptsOKInAnyChunking(chunk: Int) {
        var auth = DBusAuthClient(uid: 1000, negotiateUnixFileDescriptors: false)
        let (outcome, sent) = run(&auth, Array("OK 1234deadbeef\r\n".utf8) + [0x6C, 2], chunk: chunk)
        #expect(sent == "\0AUTH EXTERNAL 31303030\r\nBEGIN\r\n")
        // Bytes after the OK line within the same piece are the first message's.
        if chunk == 100 { #expect(outcome == .authenticated(leftover: [0x6C, 2], unixFileDescriptors: false)) }
        if chunk == 1 { #expect(outcome == .authenticated(leftover: [], unixFileDescriptors: false)) }
    }

    @Test(arguments: [1, 5, 100])
    func negotiatesFileDescriptorPassingInAnyChunking(chunk: Int) {
        var auth = DBusAuthClient(uid: 0)
        let (agreed, sent) = run(&auth, Array("OK 1234\r\nAGREE_UNIX_FD\r\n".utf8), chunk: chunk)
        #expect(agreed == .authenticated(leftover: [], unixFileDescriptors: true))
        #expect(sent == "\0AUTH EXTERNAL 30\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n")

        // A bus that cannot pass descriptors still authenticates us, without them.
        var refused = DBusAuthClient(uid: 0)
        let (outcome, _) = run(&refused, Array("OK 1234\r\nERROR not supported\r\n".utf8), chunk: chunk)
        #expect(outcome == .authenticated(leftover: [], unixFileDescriptors: false))
    }

    @Test func rejectionIsReported() {
        var auth = DBusAuthClient(uid: 1000)
        #expect(
            auth.receive(Array("REJECTED EXTERNAL\r\n".utf8)) == .rejected("the bus rejected EXTERNAL authentication"))
        var odd = DBusAuthClient(uid: 1000)
        #expect(odd.receive(Array("DATA\r\n".utf8)) == .rejected("the bus answered \"DATA\" to authentication"))
    }

    @Test func addressesParse() {
        #expect(
            DBusAddress.parse("unix:path=/tmp/a%20b,guid=12;tcp:host=x;unix:abstract=/tmp/dbus-X")
                == [.unixPath("/tmp/a b"), .unixAbstract("/tmp/dbus-X")])
        #expect(DBusAddress.systemBus(environment: [:]) == [.unixPath("/var/run/dbus/system_bus_socket")])
        #expect(
            DBusAddress.systemBus(environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/x"]) == [.unixPath("/x")])
    }
}
