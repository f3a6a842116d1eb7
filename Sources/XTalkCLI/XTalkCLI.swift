import Foundation
import XTalkSupport

/// The `xtalk` tool: parses the command line, runs one subcommand on a
/// `CommandContext`, and returns the exit code. The executable supplies the
/// real clock, stdin/stdout and Ctrl-C; tests supply a virtual clock and
/// capture the output.
@MainActor
package enum XTalkCLI {
    static let commands: [Command] = [
        DemoCommand.command, DeviceCommands.scan, DeviceCommands.connect, DeviceCommands.info, DeviceCommands.auth,
        DeviceCommands.at,
        DeviceCommands.send, DeviceCommands.listen, DeviceCommands.ping, ShellCommand.command, BenchCommand.command,
        ChaosCommand.command, FakeBlueZCommand.command, BridgeCommand.command,
    ]

    static let exitCodes = """
        EXIT CODES:
          0    success (also: scan, connect --hold, listen, shell and bridge ended with Ctrl-C)
          1    an operation failed (e.g. the device rejected a send)
          2    usage error: unknown option, missing value, bad argument
          3    no matching device was found
          4    not ready: Bluetooth unavailable, connection failed, link lost
          5    timeout: the device did not answer in time
          6    authentication failed
          130  interrupted (Ctrl-C or SIGTERM; a command not stopped 10 s later is ended)
          141  the output's reader went away (e.g. piped to head)
        """

    /// The command column of the top-level help: the longest name and two spaces.
    static let nameWidth = (commands.map(\.spec.name.count).max() ?? 0) + 2

    static let topLevel = CommandSpec(
        name: "xtalk", summary: "Talk to xTalk radios over Bluetooth LE: the SDK's command-line tool.",
        positionals: [
            PositionalSpec(name: "COMMAND", help: "One of the commands below.", isVariadic: false, isOptional: true)
        ],
        options: [],
        discussion: """
            COMMANDS:
            \(commands.map { "  " + $0.spec.name.padding(toLength: nameWidth, withPad: " ", startingAt: 0)
                + $0.spec.summary }.joined(separator: "\n"))

            Every command runs on the built-in simulated devices unless --backend platform is given; the
            simulator options (--firmware-encoding, --mtu, --latency, --traffic, --disconnect-after,
            --garbage, ...) reproduce field conditions at the desk. --json prints one JSON object per line.
            Run 'xtalk COMMAND --help' for a command's options; 'xtalk --version' prints the SDK's version.

            \(exitCodes)
            """)

    /// Runs the tool with `arguments` (without the program name).
    package static func run(_ arguments: [String], context: CommandContext) async -> Int32 {
        if arguments == ["--version"] || arguments == ["version"] {
            context.writeOut("xtalk \(XTalkSdkVersion.string)")
            return ExitCode.ok.rawValue
        }
        guard let name = arguments.first, name != "-h", name != "--help", name != "help" else {
            if arguments.count > 1, arguments.first == "help" {
                guard let command = commands.first(where: { $0.spec.name == arguments[1] }) else {
                    context.writeError("xtalk: unknown command '\(arguments[1])'; run 'xtalk --help' for the list")
                    return ExitCode.usage.rawValue
                }
                context.writeOut(ArgumentParser.help(for: command.spec, commandPath: "xtalk " + command.spec.name))
            } else {
                context.writeOut(ArgumentParser.help(for: topLevel, commandPath: "xtalk"))
            }
            return ExitCode.ok.rawValue
        }
        guard let command = commands.first(where: { $0.spec.name == name }) else {
            context.writeError("xtalk: unknown command '\(name)'; run 'xtalk --help' for the list")
            return ExitCode.usage.rawValue
        }
        let parsed: ParsedArguments
        do {
            parsed = try ArgumentParser.parse(Array(arguments.dropFirst()), for: command.spec)
        } catch {
            context.writeError("xtalk \(name): \(error.message); run 'xtalk \(name) --help' for its options")
            return ExitCode.usage.rawValue
        }
        if parsed.isHelpRequested {
            context.writeOut(ArgumentParser.help(for: command.spec, commandPath: "xtalk " + name))
            return ExitCode.ok.rawValue
        }
        // Commands without --json or --verbose (or with a --verbose of their own, as chaos) print plainly.
        let printer = Printer(
            context: context, json: parsed.declares(CommonOptions.json) && parsed[CommonOptions.json],
            verbose: parsed.declares(CommonOptions.verbose) && parsed[CommonOptions.verbose])
        do {
            try await command.run(parsed, context, printer)
            return ExitCode.ok.rawValue
        } catch {
            if error.code == .interrupted && command.endsOnInterrupt { return ExitCode.ok.rawValue }
            printer.error(error)
            return error.code.rawValue
        }
    }
}
