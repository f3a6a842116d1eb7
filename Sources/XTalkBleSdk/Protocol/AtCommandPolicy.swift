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
