// The tool's own command-line parser. No outside package is available, so this
// is one small module: a command declares its grammar as a `CommandSpec`,
// `ArgumentParser.parse` turns the words after the command name into
// `ParsedArguments`, and `ArgumentParser.help` renders the command's `--help`.
// Options are typed `OptionSpec`s, read as `arguments[spec]`, never by name.
// Every mistake is a `UsageError` whose one sentence names the flag or argument.

/// What the parser and `--help` know of an option, whatever the type of its value: its names, its value's
/// placeholder and its help. A command declares options as typed `OptionSpec`s; this is their common part.
struct OptionDeclaration: Sendable, Equatable {
    /// The long name without dashes, e.g. `timeout` for `--timeout`; `ParsedArguments` is keyed by it.
    let name: String
    /// The one-letter short name, e.g. `t` for `-t`. Use letters: `-` followed by a digit is read as a negative number.
    let short: Character?
    /// The value's placeholder in help and errors (e.g. `SECONDS`); nil makes the option a boolean flag.
    let valueName: String?
    /// What the option does, for `--help`.
    let help: String

    /// Whether the option consumes a value (otherwise it is a flag).
    var takesValue: Bool { valueName != nil }
}

/// An option as a command's grammar lists it: any `OptionSpec`, whatever its value's type.
protocol DeclaredOption: Sendable {
    var declaration: OptionDeclaration { get }
}

/// One option of a command with the type of its value: a boolean flag (`--json`) or an option whose value
/// reads as `Value` (`--timeout 5` as `Int?`). A command declares its options as static constants, lists
/// them in its `CommandSpec` and reads them with `arguments[Self.timeout]`: a misspelt option does not
/// compile, the type and the check of the value come from the declaration, and reading an option the
/// command does not declare stops the program (see `ParsedArguments`).
struct OptionSpec<Value>: DeclaredOption {
    let declaration: OptionDeclaration
    /// Reads the values given, in command-line order; nil when the option was not given (a flag given has none).
    fileprivate let read: @Sendable (_ given: [String]?) throws(UsageError) -> Value

    /// The long name without dashes.
    var name: String { declaration.name }
}

extension OptionSpec where Value == Bool {
    /// A boolean flag: true when given, once or more.
    static func flag(_ name: String, short: Character? = nil, help: String) -> Self {
        Self(declaration: OptionDeclaration(name: name, short: short, valueName: nil, help: help)) { $0 != nil }
    }
}

extension OptionSpec where Value == String? {
    /// An option with a text value: the last one given, so a later `--name` overrides an earlier one.
    static func string(_ name: String, short: Character? = nil, value valueName: String, help: String) -> Self {
        Self(declaration: OptionDeclaration(name: name, short: short, valueName: valueName, help: help)) { $0?.last }
    }

    /// An option whose value is one of `allowed` (case-sensitive), shown as `a|b|c` in help.
    static func choice(_ name: String, short: Character? = nil, from allowed: [String], help: String) -> Self {
        .parsed(
            name, short: short, value: allowed.joined(separator: "|"), help: help,
            expected: "one of " + allowed.joined(separator: ", ")
        ) { allowed.contains($0) ? $0 : nil }
    }
}

extension OptionSpec where Value == [String] {
    /// A repeatable option: every value given, in command-line order.
    static func repeatable(_ name: String, short: Character? = nil, value valueName: String, help: String) -> Self {
        Self(declaration: OptionDeclaration(name: name, short: short, valueName: valueName, help: help)) { $0 ?? [] }
    }
}

extension OptionSpec where Value == Int? {
    /// An option whose value is an integer within `range`.
    static func int(
        _ name: String, short: Character? = nil, value valueName: String, in range: ClosedRange<Int>? = nil,
        help: String
    ) -> Self {
        .parsed(name, short: short, value: valueName, help: help, expected: "an integer" + describe(range)) { text in
            Int(text).flatMap { range?.contains($0) ?? true ? $0 : nil }
        }
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
}

extension OptionSpec where Value == Double? {
    /// An option whose value is a finite decimal number within `range`.
    static func double(
        _ name: String, short: Character? = nil, value valueName: String,
        in range: ClosedRange<Double>? = nil, help: String
    ) -> Self {
        .parsed(name, short: short, value: valueName, help: help, expected: "a number" + describe(range)) { text in
            // Swift's Double(_:) also reads "nan", "inf" and hex floats; a command line wants plain decimals.
            let decimal = !text.isEmpty && text.allSatisfy { "0123456789+-.eE".contains($0) }
            guard decimal, let number = Double(text), number.isFinite else { return nil }
            return range?.contains(number) ?? true ? number : nil
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

extension OptionSpec {
    /// An option whose last value `parse` reads; nil when not given. When `parse` returns nil the usage error is
    /// the one message shape for every bad value: "invalid value 'x' for --seed: expected an unsigned integer".
    static func parsed<Wrapped>(
        _ name: String, short: Character? = nil, value valueName: String, help: String,
        expected: String, parse: @escaping @Sendable (String) -> Wrapped?
    ) -> Self
    where Value == Wrapped? {
        let declaration = OptionDeclaration(name: name, short: short, valueName: valueName, help: help)
        return Self(declaration: declaration) { given throws(UsageError) in
            guard let text = given?.last else { return nil }
            guard let value = parse(text) else {
                throw UsageError("invalid value '\(text)' for --\(name): expected \(expected)")
            }
            return value
        }
    }
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
    let options: [OptionDeclaration]
    /// Extra paragraphs for `--help` (e.g. exit codes), printed verbatim so tables keep their alignment.
    let discussion: String?

    /// Declares a command; a command without arguments or options needs only its name and summary.
    init(
        name: String,
        summary: String,
        positionals: [PositionalSpec] = [],
        options: [any DeclaredOption] = [],
        discussion: String? = nil
    ) {
        self.name = name
        self.summary = summary
        self.positionals = positionals
        self.options = options.map(\.declaration)
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

/// What the command line said: the options given and the positional arguments.
///
/// A command reads an option through the typed spec it declared, `arguments[Self.timeout]`, never by name.
/// Reading an option the command's `CommandSpec` does not declare (the same declaration: name, short name,
/// placeholder and help) is a programming error and stops the program; `declares(_:)` is for code that
/// serves several commands, such as the shared device options.
struct ParsedArguments: Sendable, Equatable {
    /// `-h` or `--help` was given; the caller prints help instead of running, so other usage errors are not raised.
    var isHelpRequested = false
    /// The positional arguments, in order.
    var positionals: [String] = []
    /// Every option given, keyed by long name, with its values in command-line order; flags map to an empty list.
    private(set) var options: [String: [String]] = [:]
    /// The options of the command the arguments were parsed for.
    private let declared: [OptionDeclaration]

    /// No arguments yet, for a command that declares `options`.
    init(declaring options: [OptionDeclaration]) {
        declared = options
    }

    /// Whether the command declares `option`.
    func declares(_ option: some DeclaredOption) -> Bool {
        declared.contains(option.declaration)
    }

    /// The option's value, read by its spec: nil (or false, or empty) when not given, a usage error when malformed.
    subscript<Value>(option: OptionSpec<Value>) -> Value {
        get throws(UsageError) { try option.read(given(option)) }
    }

    /// Whether the flag was given.
    subscript(flag: OptionSpec<Bool>) -> Bool {
        given(flag) != nil
    }

    /// Records a value of the option (`[]` for a flag given).
    fileprivate mutating func record(_ option: OptionDeclaration, value: String?) {
        options[option.name, default: []] += value.map { [$0] } ?? []
    }

    private func given(_ option: some DeclaredOption) -> [String]? {
        precondition(declares(option), "--\(option.declaration.name) is read but not declared by this command")
        return options[option.declaration.name]
    }
}

/// Parses a command's arguments against its `CommandSpec` and renders its `--help`.
enum ArgumentParser {
    /// The help option every command has; listed last in `--help`.
    static let helpOption = OptionDeclaration(
        name: "help", short: "h", valueName: nil,
        help: "Show help for this command.")

    /// The width `help(for:commandPath:)` wraps its text to.
    static let helpWidth = 80

    /// Parses the words after the command name (`["--timeout", "5", "AA"]`).
    ///
    /// Options may appear anywhere and `--` ends them; short options stand alone (`-v -t 5`, not `-vt5`). With
    /// `-h`/`--help` anywhere no usage error is raised, so help wins over a half-typed command line; otherwise
    /// the first mistake, in command-line order, is thrown.
    static func parse(_ arguments: [String], for spec: CommandSpec) throws(UsageError) -> ParsedArguments {
        var result = ParsedArguments(declaring: spec.options)
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
            let option: OptionDeclaration?
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
                option =
                    letter == helpOption.short
                    ? helpOption : spec.options.first { $0.short != nil && $0.short == letter }
            }
            guard let option else {
                firstError = firstError ?? unknownOption(spelling, in: spec)
                continue
            }
            if let valueName = option.valueName {
                // The next word is the value even if it starts with "-", so `--rssi -50` works.
                if let inlineValue {
                    result.record(option, value: inlineValue)
                } else if index < arguments.endIndex {
                    result.record(option, value: arguments[index])
                    index += 1
                } else {
                    firstError = firstError ?? UsageError("option \(spelling) needs a value (\(valueName))")
                }
            } else if inlineValue != nil {
                firstError = firstError ?? UsageError("flag \(spelling) takes no value")
            } else if option.name == helpOption.name {
                result.isHelpRequested = true
            } else {
                result.record(option, value: nil)
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
