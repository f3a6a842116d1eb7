/// How a command run with `.automatic` completes, by command family: the
/// command policy of PROTOCOL.md section 6 (the table there and this type
/// change together).
enum AtCommandPolicy: Equatable, Sendable {
    /// At its final result code (`OK`, `ERROR`, `+CME ERROR:`…): every command
    /// not listed below.
    case finalResultCode
    /// `AT+RST`: after `OK` the channel stays held until the device's
    /// `+READY`, so that the next command is not written into a rebooting
    /// radio (its UART is deaf meanwhile). The command's response is its own
    /// lines (`["OK"]`); `+READY` is an event as always. No `+READY` within
    /// the command's timeout fails it with `.timeout` and drains the channel;
    /// `ERROR` completes it at once.
    case untilReady

    /// The policy of `command` (validated text, as written).
    static func of(_ command: String) -> AtCommandPolicy {
        command.uppercased() == "AT+RST" ? .untilReady : .finalResultCode
    }
}

/// The information line a documented query answers before its `OK` (the
/// command table of PROTOCOL.md section 6; the table and this type change
/// together). The channel tells by it a command's own answer from the late
/// lines of another (`AtChannelStateMachine`): a bare `OK` before it, or
/// another information line, is another reply's; the line itself shows the
/// device has reached our command. Commands not in the table have none.
enum AtAnswerLine: Equatable, Sendable {
    /// `+PING:<token>`: exactly the token the command carried.
    case exactly(String)
    /// `+VER:`, `+FREQ:`, `+TXP:`, `+AUTH:`, `+CHAL:`, `+ID:` and what follows.
    case prefix(String)

    func matches(_ line: String) -> Bool {
        switch self {
        case .exactly(let text): line == text
        case .prefix(let prefix): line.utf8.starts(with: prefix.utf8)
        }
    }

    /// The information line `command` (validated text, as written) is answered with, if it is one of the table's.
    static func of(_ command: String) -> AtAnswerLine? {
        let upper = command.uppercased()
        if upper.hasPrefix("AT+PING=") {
            let token = command.utf8.dropFirst(8)
            // A token the device refuses is answered ERROR alone.
            guard (1...32).contains(token.count), token.allSatisfy(Self.isTokenByte) else { return nil }
            return .exactly("+PING:" + String(decoding: token, as: UTF8.self))
        }
        if upper.hasPrefix("AT+CHAL=") { return .prefix("+CHAL:") }
        switch upper {
        case "AT+VER?": return .prefix("+VER:")
        case "AT+FREQ?": return .prefix("+FREQ:")
        case "AT+TXP?": return .prefix("+TXP:")
        case "AT+AUTH?": return .prefix("+AUTH:")
        case "AT+ID?": return .prefix("+ID:")
        default: return nil
        }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }
}
