/// Prints a command's results: human-readable lines, or with `--json` one
/// JSON object per line whose first field is `type`. Diagnostics
/// (`--verbose` AT traffic, errors) go to standard error in both modes.
@MainActor
final class Printer {
    let json: Bool
    let verbose: Bool
    private let context: CommandContext

    init(context: CommandContext, json: Bool, verbose: Bool) {
        self.context = context
        self.json = json
        self.verbose = verbose
    }

    /// One result: `human` in human mode, `{"type": type, fields…}` in JSON mode.
    func record(_ type: String, _ fields: [(String, JSONValue)], human: String) {
        if json {
            context.writeOut(JSONValue.object([("type", .string(type))] + fields).jsonText)
        } else {
            context.writeOut(human)
        }
    }

    /// A human-only line (headings, blank lines); nothing in JSON mode.
    func text(_ line: String) {
        if !json { context.writeOut(line) }
    }

    /// A diagnostic line, shown with `--verbose` only.
    func trace(_ line: String) {
        if verbose { context.writeError("· " + line) }
    }

    /// A warning on standard error, in both modes (the command goes on).
    func notice(_ line: String) {
        context.writeError("xtalk: " + line)
    }

    /// The one-sentence error report.
    func error(_ error: CLIError) {
        context.writeError("xtalk: " + error.message)
    }
}
