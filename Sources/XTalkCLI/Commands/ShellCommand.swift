import Foundation
import XTalkBleSdk

enum ShellCommand {
    static let timeout = OptionSpec.int(
        "timeout", value: "MS", in: 1...600_000,
        help: "Timeout of each command (default 3000).")

    static let command = Command(
        spec: CommandSpec(
            name: "shell",
            summary: "An interactive AT terminal: each line is sent as a command; URCs print as they arrive.",
            positionals: [],
            options: [timeout, CommonOptions.encoding] + CommonOptions.device,
            discussion: """
                In the shell: type an AT command and press return. :history lists the commands so far,
                !! repeats the last one, !N repeats command N, :quit (or end of input, or Ctrl-C) ends.
                """),
        endsOnInterrupt: true
    ) { arguments, context, printer throws(CLIError) in
        let timeout: Int
        do throws(UsageError) { timeout = try arguments[Self.timeout] ?? 3_000 } catch { throw CLIError.usage(error) }
        try await withSession(arguments, context, printer) { session, device throws(CLIError) in
            try await session.prepareEncoding()
            let client = session.client
            printer.text(
                "connected to \(device.name) (\(client.atEncoding.rawValue) encoding). "
                    + "Type AT commands; :history, !!, !N, :quit.")
            // URCs print as they arrive, between commands or in the middle of one.
            client.onEvent = { event in
                switch event {
                case .diPayload(let data, let meta):
                    let (fields, text) = Render.frame(data, meta)
                    printer.record("frame", fields, human: "[urc] " + text)
                case .crcError(let meta, let line):
                    let (fields, _) = Render.meta(meta)
                    printer.record(
                        "crc_error", [("meta", .object(fields)), ("line", .string(line))], human: "[urc] " + line)
                case .atLine(let line) where line.hasPrefix("+SENDFIN:") || line.hasPrefix("+READY"):
                    printer.record("urc", [("line", .string(line))], human: "[urc] " + line)
                case .connectionStateChanged(.disconnected), .connectionStateChanged(.failed):
                    printer.record("link", [("state", .string("lost"))], human: "[link lost]")
                case .connectionStateChanged, .atLine, .sendFinished, .passthroughRaw:
                    break
                }
            }
            var history: [String] = []
            /// A line of the shell's own (not the device's), human or JSON.
            @MainActor func notice(_ message: String) {
                printer.record("notice", [("message", .string(message))], human: message)
            }
            for await rawLine in context.input {
                if Task.isCancelled { break }
                let line = rawLine.trimmingCharacters(in: .whitespaces)
                if line.isEmpty { continue }
                if line == ":quit" || line == ":exit" { break }
                if line == ":history" {
                    for (index, entry) in history.enumerated() {
                        printer.record(
                            "history", [("index", .int(index + 1)), ("command", .string(entry))],
                            human: "\(index + 1)  \(entry)")
                    }
                    continue
                }
                if line.utf8.count > StandardInputLines.maximumLineLength {
                    // Its reader kept only the head: never send a command other than the one typed.
                    notice("the line is longer than 1 MiB: not sent")
                    continue
                }
                if line.hasPrefix(":") {
                    // Not AT: a shell command this shell does not have is never sent to the device.
                    notice("unknown shell command \(line) (the shell has :history, :quit, :exit, !!, !N)")
                    continue
                }
                let command: String
                if line == "!!" {
                    guard let last = history.last else {
                        notice("no command yet")
                        continue
                    }
                    command = last
                } else if line.hasPrefix("!"), let index = Int(line.dropFirst()) {
                    guard history.indices.contains(index - 1) else {
                        notice("no command \(index)")
                        continue
                    }
                    command = history[index - 1]
                } else {
                    command = line
                }
                history.append(command)
                do {
                    let lines = try await client.runAtCommand(command, timeoutMs: timeout)
                    printer.record(
                        "response", [("command", .string(command)), ("lines", .array(lines.map(JSONValue.string)))],
                        human: lines.joined(separator: "\n"))
                } catch let error as XTalkBleError where error == .timeout || error == .busy {
                    printer.record(
                        "error", [("command", .string(command)), ("message", .string("\(error)"))],
                        human: "! \(error)")
                } catch let error as XTalkBleError where error == .cancelled {
                    break
                } catch let error as XTalkBleError {
                    if case .writeFailed = error {
                        printer.record(
                            "error", [("command", .string(command)), ("message", .string("\(error)"))],
                            human: "! \(error)")
                    } else {
                        throw CLIError.from(error, doing: command)
                    }
                } catch {
                    throw CLIError.from(error, doing: command)
                }
            }
        }
    }
}
