import Foundation

// Connecting to a bus: its address, and the authentication handshake (the
// specification, "Authentication Protocol"), as a sans-I/O state machine.

/// A bus address: where its socket is.
package enum DBusAddress: Sendable, Hashable {
    case unixPath(String)
    case unixAbstract(String)

    /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS`, else the well-known socket.
    package static func systemBus(environment: [String: String] = ProcessInfo.processInfo.environment) -> [DBusAddress]
    {
        if let text = environment["DBUS_SYSTEM_BUS_ADDRESS"], !text.isEmpty { return parse(text) }
        return [.unixPath("/var/run/dbus/system_bus_socket")]
    }

    /// Every `unix:` address in a `;`-separated list (other transports are skipped).
    package static func parse(_ text: String) -> [DBusAddress] {
        text.split(separator: ";").compactMap { entry in
            guard entry.hasPrefix("unix:") else { return nil }
            var keys: [String: String] = [:]
            for pair in entry.dropFirst(5).split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                keys[String(parts[0])] = unescape(parts[1])
            }
            if let path = keys["path"] { return .unixPath(path) }
            if let name = keys["abstract"] { return .unixAbstract(name) }
            return nil
        }
    }

    private static func unescape(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
                let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    package var description: String {
        switch self {
        case .unixPath(let path): path
        case .unixAbstract(let name): "@" + name
        }
    }
}

/// The client side of the handshake with `EXTERNAL` (the kernel vouches for
/// our uid), then `NEGOTIATE_UNIX_FD` when asked for: events in (the
/// server's bytes), actions out (`output`, to send, and the outcome).
package struct DBusAuthClient {
    package enum Outcome: Sendable, Hashable {
        /// Keep reading (after sending `takeOutput()`).
        case waiting
        /// Authenticated (send `takeOutput()`, which ends with BEGIN): the
        /// messages start with `leftover`; `unixFileDescriptors` says whether
        /// the bus agreed to pass file descriptors.
        case authenticated(leftover: [UInt8], unixFileDescriptors: Bool)
        case rejected(String)
    }

    private enum Phase { case waitingForOK, negotiating, done }

    private let negotiateUnixFileDescriptors: Bool
    private var phase = Phase.waitingForOK
    private var line: [UInt8] = []
    private var output: [UInt8]

    /// `uid` goes in the greeting, the first bytes of `takeOutput()`.
    package init(uid: UInt32, negotiateUnixFileDescriptors: Bool = true) {
        self.negotiateUnixFileDescriptors = negotiateUnixFileDescriptors
        output = DBusAuthClient.greeting(uid: uid)
    }

    /// The first bytes to send: the NUL byte, `AUTH EXTERNAL` with our uid in hex.
    package static func greeting(uid: UInt32) -> [UInt8] {
        let hexUID = Array(String(uid).utf8).map { String(format: "%02x", $0) }.joined()
        return [0] + Array("AUTH EXTERNAL \(hexUID)\r\n".utf8)
    }

    /// Bytes to send now; empty when there is nothing to say.
    package mutating func takeOutput() -> [UInt8] {
        defer { output.removeAll() }
        return output
    }

    /// Feeds the server's bytes.
    package mutating func receive(_ bytes: some Collection<UInt8>) -> Outcome {
        guard phase != .done else { return .waiting }
        var rest = Array(bytes)[...]
        while let byte = rest.popFirst() {
            line.append(byte)
            guard line.count < 16_384 else {
                phase = .done
                return .rejected("the bus sent an overlong authentication line")
            }
            guard line.count >= 2, line.suffix(2) == [0x0D, 0x0A] else { continue }
            let text = String(decoding: line.dropLast(2), as: UTF8.self)
            line.removeAll()
            switch phase {
            case .waitingForOK:
                if text.hasPrefix("OK ") {
                    guard negotiateUnixFileDescriptors else { return finish(leftover: rest, unixFDs: false) }
                    phase = .negotiating
                    output += Array("NEGOTIATE_UNIX_FD\r\n".utf8)
                    continue
                }
                phase = .done
                if text.hasPrefix("REJECTED") { return .rejected("the bus rejected EXTERNAL authentication") }
                return .rejected("the bus answered \"\(text)\" to authentication")
            case .negotiating:
                // ERROR: this bus (or its transport) passes no descriptors; the connection still works.
                return finish(leftover: rest, unixFDs: text == "AGREE_UNIX_FD")
            case .done:
                return .waiting
            }
        }
        return .waiting
    }

    private mutating func finish(leftover: ArraySlice<UInt8>, unixFDs: Bool) -> Outcome {
        phase = .done
        output += Array("BEGIN\r\n".utf8)
        return .authenticated(leftover: Array(leftover), unixFileDescriptors: unixFDs)
    }
}
