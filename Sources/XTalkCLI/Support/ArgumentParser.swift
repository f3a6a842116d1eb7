// The tool's own command-line parser. No outside package is available, so this
// is one small module: a command declares its grammar as a `CommandSpec`,
// `ArgumentParser.parse` turns the words after the command name into
// `ParsedArguments`, and `ArgumentParser.help` renders the command's `--help`.
// Every mistake is a `UsageError` whose one sentence names the flag or argument.

/// One option of a command: a boolean flag (`--json`) or an option with a value (`--timeout 5`).
struct OptionSpec: Sendable {
    /// The long name without dashes, e.g. `timeout` for `--timeout`; `ParsedArguments` is keyed by it.
    let name: String
    /// The one-letter short name, e.g. `t` for `-t`. Use letters: `-` followed by a digit is read as a negative number.
    let short: Character?
    /// The value's placeholder in help and errors (e.g. `SECONDS`); nil makes the option a boolean flag.
    let valueName: String?
    /// What the option does, for `--help`.
    let help: String

    /// Declares an option; pass `value:` to make it take a value, omit it for a boolean flag.
    init(_ name: String, short: Character? = nil, value valueName: String? = nil, help: String) {
        self.name = name
        self.short = short
        self.valueName = valueName
        self.help = help
    }

    /// Whether the option consumes a value (otherwise it is a flag).
    var takesValue: Bool { valueName != nil }
}

/// One positional argument of a command, shown as `<NAME>` in help and errors.
struct PositionalSpec: Sendable {
    /// The placeholder, e.g. `HEX`; help and errors show it as `<HEX>`.
    let name: String
    /// What the argument is, for `--help`.
    let help: String
    /// Whether it collects every remaining argument; only the last positional may be variadic.
    let isVariadic: Bool
    /// Whether it may be left out; optional positionals come after the required ones.
    let isOptional: Bool

    /// Declares a positional; by default it is required and takes exactly one word.
    init(name: String, help: String, isVariadic: Bool = false, isOptional: Bool = false) {
        self.name = name
        self.help = help
        self.isVariadic = isVariadic
        self.isOptional = isOptional
    }
}

/// A command's grammar and help text: its options, its positional arguments and what it does.
struct CommandSpec: Sendable {
    /// The command word, e.g. `scan` (or `xtalk` for the top level); the dispatcher matches on it.
    let name: String
    /// One line saying what the command does.
    let summary: String
    /// The positional arguments, in order; the last may be variadic.
    let positionals: [PositionalSpec]
    /// The options, in the order `--help` lists them; `-h`/`--help` is implied and must not be declared.
    let options: [OptionSpec]
    /// Extra paragraphs for `--help` (e.g. exit codes), printed verbatim so tables keep their alignment.
    let discussion: String?

    /// Declares a command; a command without arguments or options needs only its name and summary.
    init(
        name: String,
        summary: String,
        positionals: [PositionalSpec] = [],
        options: [OptionSpec] = [],
        discussion: String? = nil
    ) {
        self.name = name
        self.summary = summary
        self.positionals = positionals
        self.options = options
        self.discussion = discussion
    }
}

/// A wrong command line: one sentence naming the flag or argument, printed as is and mapped to the usage exit code.
struct UsageError: Error, Equatable, CustomStringConvertible {
    /// The sentence, without a trailing period, e.g. `unknown option --foo`.
    let message: String

    /// Wraps the sentence.
    init(_ message: String) {
        self.message = message
    }

    /// The sentence itself, so interpolating the error prints just the message.
    var description: String { message }
}

/// What the command line said: the options given (by long name) and the positional arguments.
struct ParsedArguments: Sendable, Equatable {
    /// `-h` or `--help` was given; the caller prints help instead of running, so other usage errors are not raised.
    var isHelpRequested: Bool
    /// The positional arguments, in order.
    var positionals: [String]
    /// Every option given, keyed by long name, with its values in command-line order; flags map to an empty list.
    var options: [String: [String]]

    /// Builds parsed arguments directly, e.g. to run a command in a test without a command line.
    init(isHelpRequested: Bool = false, positionals: [String] = [], options: [String: [String]] = [:]) {
        self.isHelpRequested = isHelpRequested
        self.positionals = positionals
        self.options = options
    }

    /// Whether the option (a flag, or an option with a value) was given at least once.
    func has(_ option: String) -> Bool {
        options[option] != nil
    }

    /// The option's last value, so a later `--timeout` overrides an earlier one; nil if not given.
    func value(_ option: String) -> String? {
        options[option]?.last
    }

    /// All values of a repeatable option, in command-line order.
    func values(_ option: String) -> [String] {
        options[option] ?? []
    }

    /// The option's last value as an integer within `range`; nil if not given, a usage error if malformed or out of range.
    func int(_ option: String, in range: ClosedRange<Int>? = nil) throws(UsageError) -> Int? {
        guard let text = value(option) else { return nil }
        guard let number = Int(text), range?.contains(number) ?? true else {
            throw Self.invalid(text, option, expected: "an integer" + Self.describe(range))
        }
        return number
    }

    /// The option's last value as a finite decimal number within `range`; nil if not given, a usage error otherwise.
    func double(_ option: String, in range: ClosedRange<Double>? = nil) throws(UsageError) -> Double? {
        guard let text = value(option) else { return nil }
        // Swift's Double(_:) also reads "nan", "inf" and hex floats; a command line wants plain decimals.
        let decimal = !text.isEmpty && text.allSatisfy { "0123456789+-.eE".contains($0) }
        guard decimal, let number = Double(text), number.isFinite, range?.contains(number) ?? true else {
            throw Self.invalid(text, option, expected: "a number" + Self.describe(range))
        }
        return number
    }

    /// The option's last value if it is one of `allowed` (case-sensitive); nil if not given, a usage error otherwise.
    func choice(_ option: String, from allowed: [String]) throws(UsageError) -> String? {
        guard let text = value(option) else { return nil }
        guard allowed.contains(text) else {
            throw Self.invalid(text, option, expected: "one of " + allowed.joined(separator: ", "))
        }
        return text
    }

    /// The one message shape for every bad value, so scripts and users see the same wording.
    private static func invalid(_ text: String, _ option: String, expected: String) -> UsageError {
        UsageError("invalid value '\(text)' for --\(option): expected \(expected)")
    }

    /// " from 1 to 10", " of at least 1" for `1...Int.max` (Int.max means "no limit" to a user), or "" without a range.
    private static func describe(_ range: ClosedRange<Int>?) -> String {
        guard let range else { return "" }
        switch (range.lowerBound == Int.min, range.upperBound == Int.max) {
        case (true, true): return ""
        case (false, true): return " of at least \(range.lowerBound)"
        case (true, false): return " of at most \(range.upperBound)"
        case (false, false): return " from \(range.lowerBound) to \(range.upperBound)"
        }
    }

    /// " from 0.05 to 60" for a range of doubles, or "" without one.
    private static func describe(_ range: ClosedRange<Double>?) -> String {
        guard let range else { return "" }
        return " from \(format(range.lowerBound)) to \(format(range.upperBound))"
    }

    /// Whole bounds print without ".0" ("60", not "60.0"), as a user would type them.
    private static func format(_ bound: Double) -> String {
        if bound == bound.rounded(), abs(bound) < 1e15 { return String(Int(bound)) }
        return "\(bound)"
    }
}

/// Parses a command's arguments against its `CommandSpec` and renders its `--help`.
enum ArgumentParser {
    /// The help option every command has; listed last in `--help`.
    static let helpOption = OptionSpec("help", short: "h", help: "Show help for this command.")

    /// The width `help(for:commandPath:)` wraps its text to.
    static let helpWidth = 80

    /// Parses the words after the command name (`["--timeout", "5", "AA"]`).
    ///
    /// Options may appear anywhere and `--` ends them; short options stand alone (`-v -t 5`, not `-vt5`). With
    /// `-h`/`--help` anywhere no usage error is raised, so help wins over a half-typed command line; otherwise
    /// the first mistake, in command-line order, is thrown.
    static func parse(_ arguments: [String], for spec: CommandSpec) throws(UsageError) -> ParsedArguments {
        var result = ParsedArguments()
        var firstError: UsageError?
        var optionsEnded = false
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !isOptionLike(argument) {
                result.positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            // The spelling the user typed (`-t` or `--timeout`) names the option in errors.
            let spelling: String
            let inlineValue: String?
            let option: OptionSpec?
            if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                if let equals = body.firstIndex(of: "=") {
                    spelling = "--" + body[..<equals]
                    inlineValue = String(body[body.index(after: equals)...])
                } else {
                    spelling = argument
                    inlineValue = nil
                }
                let name = String(spelling.dropFirst(2))
                option = name == helpOption.name ? helpOption : spec.options.first { $0.name == name }
            } else {
                spelling = argument
                inlineValue = nil
                let letter = argument.count == 2 ? argument.last : nil
                option = letter == helpOption.short ? helpOption : spec.options.first { $0.short != nil && $0.short == letter }
            }
            guard let option else {
                firstError = firstError ?? unknownOption(spelling, in: spec)
                continue
            }
            if let valueName = option.valueName {
                // The next word is the value even if it starts with "-", so `--rssi -50` works.
                if let inlineValue {
                    result.options[option.name, default: []].append(inlineValue)
                } else if index < arguments.endIndex {
                    result.options[option.name, default: []].append(arguments[index])
                    index += 1
                } else {
                    firstError = firstError ?? UsageError("option \(spelling) needs a value (\(valueName))")
                }
            } else if inlineValue != nil {
                firstError = firstError ?? UsageError("flag \(spelling) takes no value")
            } else if option.name == helpOption.name {
                result.isHelpRequested = true
            } else if result.options[option.name] == nil {
                result.options[option.name] = []
            }
        }
        if result.isHelpRequested { return result }
        if let firstError { throw firstError }
        try checkPositionals(result.positionals, against: spec.positionals)
        return result
    }

    /// Whether a word is an option: it starts with "-", is not "-" alone, and is not a negative number like `-50`.
    private static func isOptionLike(_ argument: String) -> Bool {
        guard argument.hasPrefix("-"), argument.count >= 2 else { return false }
        let second = argument[argument.index(after: argument.startIndex)]
        return !(second.isASCII && second.isNumber)
    }

    /// Too few or too many positional arguments; names the first missing placeholder or the first extra word.
    private static func checkPositionals(_ given: [String], against specs: [PositionalSpec]) throws(UsageError) {
        if let missing = specs.dropFirst(given.count).first(where: { !$0.isOptional }) {
            throw UsageError("missing argument <\(missing.name)>")
        }
        let isVariadic = specs.last?.isVariadic ?? false
        if !isVariadic, given.count > specs.count {
            throw UsageError("unexpected argument '\(given[specs.count])'")
        }
    }

    /// "unknown option --jsn; did you mean --json?" when a long name is within a small edit distance.
    private static func unknownOption(_ spelling: String, in spec: CommandSpec) -> UsageError {
        let message = "unknown option \(spelling)"
        // `-json` (one dash) is matched against the long names too: a common slip.
        let typed = spelling.hasPrefix("--") ? String(spelling.dropFirst(2)) : String(spelling.dropFirst())
        guard typed.count > 1 else { return UsageError(message) }
        var best: (name: String, distance: Int)?
        for name in spec.options.map(\.name) + [helpOption.name] {
            let distance = editDistance(typed, name)
            // Short names get a tighter limit, so `--ab` is not "corrected" to an unrelated `--ip`.
            guard distance <= min(2, max(1, name.count / 2)), distance < (best?.distance ?? .max) else { continue }
            best = (name, distance)
        }
        guard let best else { return UsageError(message) }
        return UsageError("\(message); did you mean --\(best.name)?")
    }

    /// The Levenshtein distance between two short words (insertions, deletions and substitutions).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let b = Array(b)
        // One row of the classic table at a time: previous[j] is the distance between the prefixes seen so far.
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// The command's `--help`: usage line, summary, arguments, options (with `-h, --help`) and the discussion.
    ///
    /// `commandPath` is what the user types before the arguments, e.g. `xtalk scan`. The text has no trailing
    /// newline, so `print` writes it as is.
    static func help(for spec: CommandSpec, commandPath: String) -> String {
        var usage = spec.options.map { option in
            "[--\(option.name)" + (option.valueName.map { " " + $0 } ?? "") + "]"
        }
        usage += spec.positionals.map { positional in
            let word = "<\(positional.name)>" + (positional.isVariadic ? " ..." : "")
            return positional.isOptional ? "[\(word)]" : word
        }
        let usagePrefix = "USAGE: \(commandPath) "
        // Continuation lines line up after the command path, unless that leaves too little room.
        let usageIndent = usagePrefix.count <= helpWidth / 2 ? usagePrefix.count : 8
        var sections = [wrap(usage, firstPrefix: usagePrefix, indent: usageIndent)]
        sections.append(wrapText(spec.summary, indent: 0))
        if !spec.positionals.isEmpty {
            let rows = spec.positionals.map { row("<\($0.name)>", $0.help) }
            sections.append((["ARGUMENTS:"] + rows).joined(separator: "\n"))
        }
        let rows = (spec.options + [helpOption]).map { option in
            let names = (option.short.map { "-\($0), " } ?? "") + "--\(option.name)"
            return row(names + (option.valueName.map { " " + $0 } ?? ""), option.help)
        }
        sections.append((["OPTIONS:"] + rows).joined(separator: "\n"))
        if let discussion = spec.discussion {
            let trimmed = String(discussion.reversed().drop { $0.isWhitespace }.reversed())
            if !trimmed.isEmpty { sections.append(trimmed) }
        }
        return sections.joined(separator: "\n\n")
    }

    /// Where help text starts in an ARGUMENTS or OPTIONS row: two spaces, a 24-column label, then the help.
    private static let helpColumn = 26

    /// One row: the label, then its help at `helpColumn`; a label too long for the column gets a line of its own.
    private static func row(_ label: String, _ help: String) -> String {
        let head = "  " + label
        if help.isEmpty { return head }
        let body = wrapText(help, indent: helpColumn)
        let bodyText = String(body.dropFirst(helpColumn))
        if head.count <= helpColumn - 2 {
            return head + String(repeating: " ", count: helpColumn - head.count) + bodyText
        }
        return head + "\n" + body
    }

    /// Wraps text to `helpWidth`, every line indented by `indent`; explicit newlines start new lines.
    private static func wrapText(_ text: String, indent: Int) -> String {
        let pad = String(repeating: " ", count: indent)
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            wrap(line.split(separator: " ").map(String.init), firstPrefix: pad, indent: indent)
        }.joined(separator: "\n")
    }

    /// Greedy word wrap: words never break, so a word longer than the line stands alone on its line.
    private static func wrap(_ words: [String], firstPrefix: String, indent: Int) -> String {
        var lines: [String] = []
        var line = firstPrefix
        var lineHasWord = false
        for word in words {
            if lineHasWord, line.count + 1 + word.count > helpWidth {
                lines.append(line)
                line = String(repeating: " ", count: indent)
                lineHasWord = false
            }
            line += (lineHasWord ? " " : "") + word
            lineHasWord = true
        }
        lines.append(lineHasWord ? line : String(line.reversed().drop { $0 == " " }.reversed()))
        return lines.joined(separator: "\n")
    }
}
